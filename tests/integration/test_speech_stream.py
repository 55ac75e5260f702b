"""`/v1/audio/speech/stream`, the WebSocket, through the `websockets` package's client against a
live server on the tiny checkpoint (one for the module, with keys and test faults), and a
keyless one on the null engine for what an open server does.

Each test drives whole sessions: text in pieces, segments cut at sentence ends, each segment's
messages and audio in order; malformed messages; a sidecar killed under a segment; a client
that hangs up; the bounds.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from tests.helpers.live_server import AUTH, KEY, LiveServer, live
from tests.helpers.waits import wait_until

RECV_S = 120  # a whole segment on a loaded 2-core machine; the tests wait on messages, not time
BUFFER = 160  # --stream-buffer-chars
PER_KEY = 2  # --stream-sessions-per-key
TOTAL = 3  # --stream-sessions
IDLE_S = 5  # --stream-idle-s


@pytest.fixture(scope="module")
def server(checkpoint_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    flags = (
        "--stream-buffer-chars",
        str(BUFFER),
        "--stream-sessions-per-key",
        str(PER_KEY),
        "--stream-sessions",
        str(TOTAL),
        "--stream-idle-s",
        str(IDLE_S),
    )
    with live(
        tmp_path_factory.mktemp("stream"), *flags, checkpoint=checkpoint_dir, faults=True
    ) as running:
        yield running


def ws_url(server: LiveServer) -> str:
    return server.url.replace("http://", "ws://") + "/v1/audio/speech/stream"


def session(server: LiveServer, headers: dict[str, str] | None = None) -> ClientConnection:
    return connect(
        ws_url(server), additional_headers=AUTH if headers is None else headers, open_timeout=30
    )


def send(ws: ClientConnection, kind: str, **fields: Any) -> None:
    ws.send(json.dumps({"type": kind, **fields}))


def message(ws: ClientConnection) -> dict[str, Any]:
    """The next text message (audio in between is not expected here)."""
    got = ws.recv(timeout=RECV_S)
    assert isinstance(got, str), f"expected a message, got {len(got)} bytes of audio"
    parsed: dict[str, Any] = json.loads(got)
    return parsed


def utterance(ws: ClientConnection) -> list[dict[str, Any]]:
    """Every message up to and including session.done; each audio.done gets the audio bytes
    that came before it (`audio`) and how many frames they came in (`frames`)."""
    out: list[dict[str, Any]] = []
    audio, frames = bytearray(), 0
    while True:
        got = ws.recv(timeout=RECV_S)
        if isinstance(got, bytes):
            assert out and out[-1]["type"] == "audio.start", "audio outside a segment"
            audio, frames = audio + got, frames + 1
            continue
        event = json.loads(got)
        if event["type"] == "audio.done":
            event["audio"], event["frames"], audio, frames = bytes(audio), frames, bytearray(), 0
        out.append(event)
        if event["type"] == "session.done":
            return out


def segments(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == "audio.done"]


def test_the_sessions_in_all_and_per_key_are_bounded(server: LiveServer) -> None:
    with session(server) as first, session(server) as second:
        for ws in (first, second):  # both usable
            send(ws, "session.config", response_format="pcm")
        with session(server) as third:  # one key's third
            refused = message(third)
            assert refused["type"] == "error" and refused["code"] == "too_many_sessions"
            with pytest.raises(ConnectionClosed) as closed:
                third.recv(timeout=RECV_S)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1013
        with session(server, {}) as keyless:
            # A session that has not shown its key yet is counted apart, and by its key once it
            # shows it: this key's are full.
            send(keyless, "input.text", text="Hello.")
            assert message(keyless)["code"] == "invalid_api_key"
            send(keyless, "session.config", api_key=KEY)
            assert message(keyless)["code"] == "too_many_sessions"


def test_a_whole_session_of_two_utterances(server: LiveServer) -> None:
    with session(server) as ws:
        send(ws, "session.config", voice="alloy", response_format="pcm", seed=5)
        for piece in ("Good morning to", " you. How are you", " today? I am fine", "."):
            send(ws, "input.text", text=piece)
        send(ws, "input.done")
        events = utterance(ws)
        starts = [e for e in events if e["type"] == "audio.start"]
        assert [s["sentence_text"] for s in starts] == [
            "Good morning to you.",
            "How are you today?",
            "I am fine.",
        ]
        assert all(s["format"] == "pcm" and s["sample_rate"] == 24000 for s in starts)
        done = segments(events)
        assert [(d["utterance_index"], d["sentence_index"], d["error"]) for d in done] == [
            (0, 0, None),
            (0, 1, None),
            (0, 2, None),
        ]
        assert all(d["total_bytes"] == len(d["audio"]) > 0 for d in done)
        assert events[-1] == {"type": "session.done", "utterance_index": 0, "total_sentences": 3}
        # More utterances in another format, without a sentence end (the flush cuts them).
        # Its first chunk ends at the comma (a short first chunk): two chunks, two frames when
        # streamed.
        bye = (
            "Goodbye for now, and thank you so much for listening to every one of these words today"
        )
        for stream_audio, frames in ((False, 1), (True, 2)):
            send(ws, "session.config", response_format="wav", stream_audio=stream_audio)
            send(ws, "input.text", text=bye)
            send(ws, "input.done")
            [done] = segments(events := utterance(ws))
            assert done["audio"][:4] == b"RIFF" and done["utterance_index"] == 1 + stream_audio
            assert done["frames"] == frames and events[-1]["total_sentences"] == 1
        send(ws, "session.close")
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=RECV_S)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1000


def test_malformed_and_unknown_messages_leave_the_session_usable(server: LiveServer) -> None:
    with session(server) as ws:
        ws.send("not json at all")
        ws.send(b"\x00\x01")
        send(ws, "speech.please")
        send(ws, "input.text", text=7)
        send(ws, "session.config", speed="fast")
        send(ws, "session.config", input="Text goes in input.text.")
        codes = [message(ws) for _ in range(6)]
        assert all(c["type"] == "error" for c in codes)
        assert [c["param"] for c in codes[3:]] == ["text", "speed", "input"]
        send(ws, "session.config", response_format="pcm")
        send(ws, "input.text", text="Still here.")
        send(ws, "session.config", response_format="wav")  # mid-utterance: refused
        assert message(ws)["type"] == "error"
        send(ws, "input.done")
        [done] = segments(utterance(ws))
        assert done["error"] is None and done["total_bytes"] > 0


def test_a_browser_shows_its_key_in_the_first_message(server: LiveServer) -> None:
    with pytest.raises(InvalidStatus) as refused:  # a wrong header: no handshake
        session(server, {"Authorization": "Bearer sk-wrong"})
    assert refused.value.response.status_code == 403
    with session(server, {}) as ws:
        send(ws, "session.config", api_key=KEY, response_format="pcm")
        send(ws, "input.text", text="Hello from a browser.")
        send(ws, "input.done")
        assert segments(utterance(ws))[0]["error"] is None
    with session(server, {}) as ws:
        send(ws, "session.config", api_key="sk-wrong")
        assert message(ws)["code"] == "invalid_api_key"
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=RECV_S)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008


def test_text_past_the_buffer_is_refused_and_the_rest_spoken(server: LiveServer) -> None:
    with session(server) as ws:
        send(ws, "session.config", response_format="pcm")
        held = "a long run of words with no end in sight " * 2  # 84 characters, no cut yet
        send(ws, "input.text", text=held)
        send(ws, "input.text", text="x " * 40)  # 80 more: past 160
        refused = message(ws)
        assert refused["type"] == "error" and refused["code"] == "buffer_full"
        send(ws, "input.done")
        [done] = segments(utterance(ws))
        assert done["error"] is None


def test_a_message_past_what_the_buffer_could_hold_closes_the_connection(
    server: LiveServer,
) -> None:
    with session(server) as ws:
        ws.send(json.dumps({"type": "input.text", "text": "x" * (64 * 1024 + 12 * BUFFER)}))
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=RECV_S)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009  # too big


def test_a_sidecar_killed_under_a_segment_costs_it_a_retry_not_the_session(
    server: LiveServer,
) -> None:
    data_dir = Path(server.health()["settings"]["data_dir"])
    once = data_dir / "test-faults" / "hang-once"
    once.touch()
    [pid] = [s["pid"] for s in server.health()["sidecars"] if s["pid"]]
    with session(server) as ws:
        send(ws, "session.config", response_format="pcm")
        send(
            ws, "input.text", text=f"The first one. The second one [[fault:hang@{once}]]. A third."
        )
        send(ws, "input.done")
        # the batch holding the second segment has started (and hangs)
        wait_until(lambda: not once.exists(), RECV_S, "the hang fault to fire")
        os.kill(pid, signal.SIGKILL)
        events = utterance(ws)
    done = segments(events)
    assert [(d["sentence_index"], d["error"]) for d in done] == [(0, None), (1, None), (2, None)]
    assert all(d["total_bytes"] > 0 for d in done)
    server.wait_for(lambda b: all(s["pid"] != pid for s in b["sidecars"]), RECV_S, "a new sidecar")


def test_a_client_that_hangs_up_cancels_its_segments(server: LiveServer) -> None:
    # Five segments, three made at once (two ahead), each batch 3 s slower or more.
    slow = " ".join(f"Part {i} [[fault:slow:3]]." for i in range(5))
    assert len(slow) < BUFFER
    with session(server) as ws:
        send(ws, "session.config", response_format="pcm")
        send(ws, "input.text", text=slow)
        send(ws, "input.done")
        server.wait_for(lambda b: b["queue"]["tasks"] >= 3, RECV_S, "the segments to be made")
    # Hung up while they are being made: nothing of them is left within much less than 3 s.
    server.wait_for(
        lambda b: b["queue"]["tasks"] == 0 and b["queue"]["reservations"] == 0,
        2.5,
        "the session's work to be cancelled",
    )


def test_an_idle_session_is_closed_and_a_busy_one_is_not(server: LiveServer) -> None:
    with session(server) as ws:
        send(ws, "session.config", response_format="pcm")
        # Busy past the idle time without a message: its segment is being made (4 s slower
        # at least, 5 s of silence from the client with the config), and it is not closed.
        send(ws, "input.text", text="A slow one [[fault:slow:4]].")
        send(ws, "input.done")
        assert segments(utterance(ws))[0]["error"] is None
        waited = time.monotonic()
        idle = message(ws)
        assert idle["type"] == "error" and idle["code"] == "idle"
        assert time.monotonic() - waited >= IDLE_S - 1
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=RECV_S)


def test_an_open_server_takes_no_key_and_no_other_site(tmp_path: Path) -> None:
    with live(tmp_path, key=None) as server:
        with session(server, {}) as ws:
            send(ws, "input.text", text="Hello, nobody asked for a key.")
            send(ws, "input.done")
            [done] = segments(utterance(ws))
            assert done["error"] is None and done["total_bytes"] > 0
        with pytest.raises(InvalidStatus) as refused:
            session(server, {"Origin": "https://elsewhere.example"})
        assert refused.value.response.status_code == 403


def test_a_refused_config_speaks_nothing_until_a_valid_one_comes(server: LiveServer) -> None:
    with session(server) as ws:
        send(ws, "session.config", voice="no-such-voice", response_format="pcm")
        refused = message(ws)
        assert refused["type"] == "error" and refused["param"] == "voice"
        send(ws, "input.text", text="Not in mp3, please.")
        send(ws, "input.done")
        for _ in range(2):  # each text, and the end of the utterance, gets the error again
            again = message(ws)
            assert again["type"] == "error" and again["param"] == "voice"
            assert "until a valid session.config" in again["message"]
        send(ws, "session.config", response_format="pcm", speed=99)  # another field refused
        assert message(ws)["param"] == "speed"
        send(ws, "input.text", text="Still not.")
        assert message(ws)["param"] == "speed"
        send(ws, "session.config", voice="alloy", response_format="pcm")
        send(ws, "input.text", text="Now in pcm.")
        send(ws, "input.done")
        events = utterance(ws)  # only this text: nothing of what was refused
        assert [e["sentence_text"] for e in events if e["type"] == "audio.start"] == ["Now in pcm."]
        assert [e["format"] for e in events if e["type"] == "audio.start"] == ["pcm"]
