"""supervisor/http/stream/session.py: a session's text as segments and utterance ends, what it
holds unspoken, and when it is idle; on the real app's services (no client is needed for these)."""

from __future__ import annotations

from typing import cast

from starlette.testclient import TestClient
from starlette.websockets import WebSocket

from supervisor.http.stream.session import SEGMENT_CHARS, Segment, Session, UtteranceEnd
from supervisor.tenants import OPEN

APP_SETTINGS = {"max_input_chars": 100}


def new_session(client: TestClient) -> Session:
    # No socket: these methods only queue; the socket's side runs in test_reader and test_writer.
    return Session(cast(WebSocket, None), client.app.state.services, OPEN)


def test_text_becomes_segments_then_an_utterance_end(client: TestClient) -> None:
    async def scenario() -> None:
        session = new_session(client)
        session.config = {"voice": "alloy"}
        for segment in session.segmenter.feed("One. Two. Thr"):
            session.add(segment)
        assert session.buffered() == sum(len(s.text) for s in session.pending) + len("Thr")
        session.flush()
        pending = list(session.pending)
        texts = [s.text for s in pending if isinstance(s, Segment)]
        assert texts == ["One.", "Two.", "Thr"]
        assert [s.index for s in pending if isinstance(s, Segment)] == [0, 1, 2]
        assert pending[-1] == UtteranceEnd(0, 3)
        assert all(s.config == {"voice": "alloy"} for s in pending if isinstance(s, Segment))
        assert (session.utterance, session.count) == (1, 0)
        assert session.wake.is_set() and not session.idle()

    client.portal.call(scenario)


def test_a_close_ends_no_empty_utterance_but_input_done_does(client: TestClient) -> None:
    async def scenario() -> None:
        session = new_session(client)
        assert session.idle()
        session.flush(ending=False)
        assert not session.pending
        session.flush()
        assert list(session.pending) == [UtteranceEnd(0, 0)]

    client.portal.call(scenario)


def test_segments_are_cut_at_the_input_limit(client: TestClient) -> None:
    async def scenario() -> None:
        session = new_session(client)
        for segment in session.segmenter.feed("word " * 100):
            session.add(segment)
        session.flush()
        texts = [s.text for s in session.pending if isinstance(s, Segment)]
        assert len(texts) > 1 and max(map(len, texts)) <= min(SEGMENT_CHARS, 100)

    client.portal.call(scenario)
