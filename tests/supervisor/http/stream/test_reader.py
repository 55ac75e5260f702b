"""supervisor/http/stream/reader.py: each malformed message answered with an `error` naming
what, the session going on; the text buffer's bound; a session closed once idle, and one without
a key closed once its time to show one is up."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient, WebSocketTestSession

from tests.helpers.app_client import WS_HEADERS
from tests.helpers.ws_session import PATH, kinds, received

BUFFER = 40
IDLE_S, AUTH_S = 3.0, 2.0  # long enough that a loaded machine's slowness is not idleness
APP_SETTINGS = {"stream_buffer_chars": BUFFER, "stream_idle_s": IDLE_S, "stream_auth_s": AUTH_S}
CONFIG = {"type": "session.config", "voice": "alloy", "response_format": "pcm"}


@contextlib.contextmanager
def session(client: TestClient) -> Iterator[WebSocketTestSession]:
    with client.websocket_connect(PATH, headers=WS_HEADERS) as ws:
        ws.send_json(CONFIG)
        yield ws


def error(ws: WebSocketTestSession) -> dict[str, Any]:
    answer: dict[str, Any] = ws.receive_json()
    assert answer["type"] == "error", answer
    return answer


def error_after(ws: WebSocketTestSession, message: dict[str, Any]) -> dict[str, Any]:
    ws.send_json(message)
    return error(ws)


@pytest.mark.parametrize(
    ("frame", "code", "param"),
    [
        (b"\x00binary", "invalid_message", None),
        ("{not json", "invalid_message", None),
        ("[" * 100_000, "invalid_message", None),
        ('{"type": "input.text", "text": "\\ud800"}', "invalid_text", "text"),
        ('{"type": "input.speak"}', "invalid_message", "type"),
        ('"input.done"', "invalid_message", "type"),
        ('{"type": "input.text", "text": 12}', "invalid_request", "text"),
    ],
)
def test_a_malformed_message_is_told_and_the_session_goes_on(
    client: TestClient, frame: str | bytes, code: str, param: str | None
) -> None:
    with session(client) as ws:
        if isinstance(frame, bytes):
            ws.send_bytes(frame)
        else:
            ws.send_text(frame)
        told = error(ws)
        assert (told["code"], told["param"]) == (code, param)
        ws.send_json({"type": "input.text", "text": "Still here."})
        ws.send_json({"type": "session.close"})
        messages, closed = received(ws)
    assert closed == 1000 and kinds(messages)[0] == "audio.start"


def test_text_past_the_buffer_is_dropped(client: TestClient) -> None:
    with session(client) as ws:
        ws.send_json({"type": "input.text", "text": "a" * 30})  # no sentence end: held
        told = error_after(ws, {"type": "input.text", "text": "b" * 20})
        assert told["code"] == "buffer_full" and f"holds {BUFFER} characters" in told["message"]
        ws.send_json({"type": "input.done"})
        messages, _ = received(ws, until="session.done")
    assert messages[0]["sentence_text"] == "a" * 30  # what was dropped is not spoken


def test_an_idle_session_is_closed(client: TestClient) -> None:
    with session(client) as ws:
        messages, closed = received(ws)  # nothing sent after the config: idle
    assert closed == 1000 and messages == [
        {
            "type": "error",
            "message": f"nothing for {IDLE_S:g} s: the session is closed",
            "code": "idle",
            "param": None,
        }
    ]


def test_a_session_without_a_key_in_time_is_closed(client: TestClient) -> None:
    saved = client.headers.pop("Authorization")
    try:
        with client.websocket_connect(PATH, headers={"Host": "localhost"}) as ws:
            ws.send_json({"type": "input.text", "text": "Hi."})
            first = error(ws)
            messages, closed = received(ws)
    finally:
        client.headers["Authorization"] = saved
    assert first["code"] == "invalid_api_key" and first["param"] == "api_key"
    assert closed == 1008 and messages[0]["message"].startswith(f"no API key within {AUTH_S:g} s")
