"""`/v1/audio/speech/stream` as an attacker uses it: sockets that never show a key, messages
that are refused to keep a session alive, frames built to break the reader (deep nesting, nested
fields, lone surrogates), and a page on another port of an open loopback server.

A live server on the null engine (the audio does not matter here) and the `websockets` client;
each test waits on messages and close codes, not on time, but for the deadlines it checks.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from tests.helpers.live_server import AUTH, KEY, LiveServer, live

RECV_S = 60
TOTAL = 3  # --stream-sessions: with a key, and apart from them, without one yet
AUTH_S = 4.0  # --stream-auth-s
IDLE_S = 3.0  # --stream-idle-s


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    flags = (
        "--stream-sessions",
        str(TOTAL),
        "--stream-sessions-per-key",
        str(TOTAL),
        "--stream-auth-s",
        str(AUTH_S),
        "--stream-idle-s",
        str(IDLE_S),
    )
    with live(tmp_path_factory.mktemp("stream-attacks"), *flags) as running:
        yield running


def session(server: LiveServer, headers: dict[str, str] | None = None) -> ClientConnection:
    url = server.url.replace("http://", "ws://") + "/v1/audio/speech/stream"
    return connect(url, additional_headers=AUTH if headers is None else headers, open_timeout=30)


def send(ws: ClientConnection, kind: str, **fields: Any) -> None:
    ws.send(json.dumps({"type": kind, **fields}))


def message(ws: ClientConnection) -> dict[str, Any]:
    got = ws.recv(timeout=RECV_S)
    assert isinstance(got, str), f"expected a message, got {len(got)} bytes of audio"
    parsed: dict[str, Any] = json.loads(got)
    return parsed


def close_code(ws: ClientConnection) -> int | None:
    """The code the server closed with, once the messages before it are read."""
    with pytest.raises(ConnectionClosed) as closed:
        while True:
            ws.recv(timeout=RECV_S)
    return closed.value.rcvd.code if closed.value.rcvd is not None else None


def speaks(ws: ClientConnection, text: str = "Still here.") -> None:
    """The session speaks `text`: one segment, no error."""
    send(ws, "input.text", text=text)
    send(ws, "input.done")
    events = []
    while not events or events[-1]["type"] != "session.done":
        got = ws.recv(timeout=RECV_S)
        if isinstance(got, str):
            events.append(json.loads(got))
    [done] = [e for e in events if e["type"] == "audio.done"]
    assert done["error"] is None and done["total_bytes"] > 0, events


def test_sockets_without_a_key_never_keep_a_key_out(server: LiveServer) -> None:
    with contextlib.ExitStack() as stack:
        keyless = [stack.enter_context(session(server, {})) for _ in range(TOTAL)]
        for ws in keyless:  # refused messages; each socket stays open meanwhile
            ws.send("{}")
            assert message(ws)["code"] == "invalid_api_key"
        with session(server, {}) as browser:  # a key in the first message: the oldest goes
            assert message(keyless[0])["code"] == "too_many_sessions"
            assert close_code(keyless[0]) == 1013
            send(browser, "session.config", api_key=KEY, response_format="pcm")
            # The header's key, beside the keyless ones (counted apart) and the browser's.
            with session(server) as keyed:
                send(keyed, "session.config", response_format="pcm")
                speaks(keyed)
            speaks(browser)


def test_a_socket_without_a_key_is_closed_after_the_auth_time_whatever_it_sends(
    server: LiveServer,
) -> None:
    with session(server, {}) as ws:
        opened = time.monotonic()
        deadline = opened + AUTH_S + 10
        refused = 0
        while time.monotonic() < deadline:
            try:
                ws.send(json.dumps({"type": "input.text", "text": "Let me in."}))
                got = json.loads(ws.recv(timeout=RECV_S))
            except ConnectionClosed as closed:
                assert closed.rcvd is not None and closed.rcvd.code == 1008
                break
            assert got["code"] == "invalid_api_key" and got["param"] == "api_key"
            refused += 1
            time.sleep(0.2)  # the attacker's pace: refused messages, over the auth deadline
        else:
            pytest.fail("a socket without a key was kept open by its refused messages")
    assert refused >= 2 and AUTH_S - 0.5 <= time.monotonic() - opened <= AUTH_S + 5


def test_refused_messages_do_not_keep_a_session_from_idling_out(server: LiveServer) -> None:
    with session(server) as ws:
        send(ws, "session.config", response_format="pcm")
        taken = time.monotonic()
        codes = []
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                assert time.monotonic() - taken < IDLE_S + 5, "refused messages kept it alive"
                send(ws, "speech.please")
                while (got := message(ws))["code"] != "invalid_message":
                    codes.append(got["code"])
                time.sleep(0.3)  # the client's pace: refused messages, over the idle deadline
        while True:  # what came before the close
            try:
                codes.append(message(ws)["code"])
            except ConnectionClosed:
                break
    assert codes == ["idle"] and time.monotonic() - taken >= IDLE_S - 0.5
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1000


def test_frames_built_to_break_the_reader_get_an_error_naming_their_field(
    server: LiveServer,
) -> None:
    with session(server) as ws:
        ws.send("[" * 20000 + "]" * 20000)
        assert message(ws)["code"] == "invalid_message"
        send(ws, "session.config", timestamp_granularities=[["word"]])
        assert message(ws)["param"] == "timestamp_granularities"
        send(ws, "session.config", timestamp_granularities=[{"a": 1}])
        assert message(ws)["param"] == "timestamp_granularities"
        send(ws, "session.config", voice="alloy\ud800")
        refused = message(ws)
        assert (refused["code"], refused["param"]) == ("invalid_text", "voice")
        send(ws, "session.config", response_format="pcm")
        speaks(ws)
    with session(server, {}) as ws:  # a key no UTF-8 can carry: said, and closed
        send(ws, "session.config", api_key="sk-\ud800")
        refused = message(ws)
        assert refused["param"] == "api_key" and refused["code"] == "invalid_text"
        send(ws, "session.config", api_key=KEY, response_format="pcm")  # then its real key
        speaks(ws)


def test_a_lone_surrogate_in_the_text_is_refused_before_the_batcher(server: LiveServer) -> None:
    with session(server) as ws:
        send(ws, "session.config", response_format="pcm")
        send(ws, "input.text", text="Broken \ud800 text.")
        refused = message(ws)
        assert (refused["code"], refused["param"]) == ("invalid_text", "text")
        speaks(ws, "Fine text.")  # nothing of the refused text was kept
    assert server.health()["queue"]["tasks"] == 0


def test_an_open_server_takes_no_page_on_another_port(tmp_path: Path) -> None:
    with live(tmp_path, key=None) as open_server:
        port = open_server.url.rsplit(":", 1)[1]
        for origin in ("http://localhost:8080", "http://127.0.0.1:1", "null"):
            with pytest.raises(InvalidStatus) as refused:
                session(open_server, {"Origin": origin})
            assert refused.value.response.status_code == 403
        with session(open_server, {"Origin": f"http://127.0.0.1:{port}"}) as ws:
            speaks(ws, "Hello from this server's own page.")
