"""supervisor/http/stream/config.py: a session.config checked as a speech request is, with the
session's own fields; one refused leaves the session speaking nothing, each text told why, until
a valid one comes; a config comes between utterances only."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient, WebSocketTestSession

from tests.helpers.app_client import WS_HEADERS
from tests.helpers.ws_session import PATH, kinds, received

CONFIG = {"type": "session.config", "voice": "alloy", "response_format": "pcm"}


def said(ws: WebSocketTestSession, message: dict[str, Any]) -> dict[str, Any]:
    """The error the server answers `message` with."""
    ws.send_json(message)
    answer: dict[str, Any] = ws.receive_json()
    assert answer["type"] == "error", answer
    return answer


@pytest.mark.parametrize(
    ("config", "param"),
    [
        ({"input": "Hi."}, "input"),
        ({"stream_audio": "yes"}, "stream_audio"),
        ({"hold_for_checks": 1}, "hold_for_checks"),
        ({"speed": 99}, "speed"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_a_config_is_checked_as_a_speech_request(
    client: TestClient, config: dict[str, Any], param: str
) -> None:
    with client.websocket_connect(PATH, headers=WS_HEADERS) as ws:
        assert said(ws, {**CONFIG, **config})["param"] == param


def test_a_refused_config_refuses_text_until_a_valid_one(client: TestClient) -> None:
    with client.websocket_connect(PATH, headers=WS_HEADERS) as ws:
        said(ws, {**CONFIG, "speed": 99})
        refused = said(ws, {"type": "input.text", "text": "Hi."})
        assert refused["param"] == "speed"
        assert refused["message"].startswith("nothing is spoken until a valid session.config")
        assert said(ws, {"type": "input.done"})["param"] == "speed"
        ws.send_json(CONFIG)
        ws.send_json({"type": "input.text", "text": "Hi."})
        ws.send_json({"type": "input.done"})
        messages, _ = received(ws, until="session.done")
    assert kinds(messages) == ["audio.start", "bytes", "audio.done", "session.done"]


def test_a_config_comes_between_utterances(client: TestClient) -> None:
    with client.websocket_connect(PATH, headers=WS_HEADERS) as ws:
        ws.send_json(CONFIG)
        ws.send_json({"type": "input.text", "text": "An utterance not yet done"})
        assert said(ws, CONFIG)["param"] == "type"
        ws.send_json({"type": "input.done"})
        received(ws, until="session.done")
        ws.send_json({**CONFIG, "response_format": "wav"})  # now it is taken
        ws.send_json({"type": "input.text", "text": "Hi."})
        ws.send_json({"type": "input.done"})
        messages, _ = received(ws, until="session.done")
    assert messages[0]["format"] == "wav" and messages[1][:4] == b"RIFF"
