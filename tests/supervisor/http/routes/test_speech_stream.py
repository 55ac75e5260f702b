"""supervisor/http/routes/speech_stream.py: who may open a session (a key in the header, or in
the first session.config; a Host allowed), how many, and a whole session in order to its close
(the protocol against the tiny checkpoint, its faults and bounds:
tests/integration/test_speech_stream.py, test_speech_stream_attacks.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from tests.helpers.app_client import KEY, WS_HEADERS
from tests.helpers.ws_session import PATH, kinds, received

APP_SETTINGS = {"stream_sessions_per_key": 1}
CONFIG = {"type": "session.config", "voice": "alloy", "response_format": "pcm"}


def test_a_whole_session_in_order_to_its_close(client: TestClient) -> None:
    with client.websocket_connect(PATH, headers=WS_HEADERS) as ws:
        ws.send_json(CONFIG)
        ws.send_json({"type": "input.text", "text": "Hello there. How are"})
        ws.send_json({"type": "input.done"})
        ws.send_json({"type": "session.close"})
        messages, code = received(ws)
    assert code == 1000
    assert kinds(messages) == ["audio.start", "bytes", "audio.done"] * 2 + ["session.done"]
    assert [m["sentence_text"] for m in messages if kinds([m]) == ["audio.start"]] == [
        "Hello there.",
        "How are",
    ]
    assert messages[-1] == {"type": "session.done", "utterance_index": 0, "total_sentences": 2}


@pytest.mark.parametrize(
    "headers",
    [
        {"Authorization": "Bearer sk-wrong", "Host": "localhost"},
        {"Authorization": f"Basic {KEY}", "Host": "localhost"},
        {**WS_HEADERS, "Host": "evil.example"},
    ],
)
def test_a_wrong_key_or_host_is_refused_before_the_handshake(
    client: TestClient, headers: dict[str, str]
) -> None:
    with (
        pytest.raises(WebSocketDisconnect) as refused,
        client.websocket_connect(PATH, headers=headers),
    ):
        pass
    assert refused.value.code == 1008


@contextlib.contextmanager
def without_key(client: TestClient) -> Iterator[None]:
    """The client's handshakes without its Authorization header, as a browser's are."""
    saved = client.headers.pop("Authorization")
    try:
        yield
    finally:
        client.headers["Authorization"] = saved


def test_a_key_may_come_in_the_first_config_instead(client: TestClient) -> None:
    with without_key(client), client.websocket_connect(PATH, headers={"Host": "localhost"}) as ws:
        ws.send_json({**CONFIG, "api_key": KEY})
        ws.send_json({"type": "input.text", "text": "Hi."})
        ws.send_json({"type": "session.close"})
        messages, code = received(ws)
    assert code == 1000 and kinds(messages)[0] == "audio.start"
    with without_key(client), client.websocket_connect(PATH, headers={"Host": "localhost"}) as ws:
        ws.send_json({**CONFIG, "api_key": "sk-wrong"})
        messages, code = received(ws)
    assert code == 1008 and messages[0]["code"] == "invalid_api_key"


def test_a_key_holds_its_sessions_and_gets_its_place_back(client: TestClient) -> None:
    with client.websocket_connect(PATH, headers=WS_HEADERS) as first:
        first.send_json(CONFIG)
        with client.websocket_connect(PATH, headers=WS_HEADERS) as second:
            messages, code = received(second)
        assert code == 1013 and messages[0]["code"] == "too_many_sessions"
        first.send_json({"type": "session.close"})
        assert received(first)[1] == 1000
    with client.websocket_connect(PATH, headers=WS_HEADERS) as again:
        again.send_json({"type": "session.close"})
        assert received(again) == ([], 1000)
