"""supervisor/http/stream/producer.py: segments made at most AHEAD ahead of the one being sent
(a client that does not read holds the rest as text), each through the speech route's path into
its frames, a refused one ending in its error; on the real app's services and sidecar."""

from __future__ import annotations

import asyncio
from typing import cast

from starlette.testclient import TestClient
from starlette.websockets import WebSocket

from supervisor.errors import ServerError
from supervisor.http.stream.producer import produce
from supervisor.http.stream.session import AHEAD, Made, Session, UtteranceEnd
from supervisor.tenants import OPEN
from tests.helpers.harness import wait_for

SEGMENTS = 5


async def frames(made: Made) -> list[bytes | ServerError]:
    out: list[bytes | ServerError] = []
    while (data := await made.frames.get()) is not None:
        out.append(data)
        if isinstance(data, ServerError):
            break
    return out


def test_at_most_ahead_are_made_until_one_is_sent(client: TestClient) -> None:
    async def scenario() -> None:
        # No socket: the producer never sends; the writer's side runs in test_writer.
        session = Session(cast(WebSocket, None), client.app.state.services, OPEN)
        session.config = {"voice": "alloy", "response_format": "pcm"}
        for i in range(SEGMENTS):
            session.add(f"Sentence number {i}.")
        producer = asyncio.ensure_future(produce(session))
        try:
            await wait_for(lambda: session.ordered.qsize() == AHEAD + 1, 30, "the first segments")
            started = [session.ordered.get_nowait() for _ in range(AHEAD + 1)]
            made = [cast(Made, m) for m in started]
            for each in made:  # each made whole, while the rest wait for a slot
                audio = await asyncio.wait_for(frames(each), 30)
                assert audio and all(isinstance(a, bytes) for a in audio)
            assert len(session.pending) == SEGMENTS - (AHEAD + 1)
            assert [m.segment.index for m in made] == list(range(AHEAD + 1))
            session.slots.release()  # the writer sent one
            await wait_for(lambda: session.ordered.qsize() == 1, 30, "the next segment")
            assert len(session.pending) == SEGMENTS - (AHEAD + 2)
        finally:
            producer.cancel()

    client.portal.call(scenario)


def test_a_segment_refused_ends_in_its_error_and_markers_pass_in_order(client: TestClient) -> None:
    async def scenario() -> None:
        session = Session(cast(WebSocket, None), client.app.state.services, OPEN)
        session.config = {"voice": "no-such-voice"}
        session.add("Hello.")
        session.flush()
        producer = asyncio.ensure_future(produce(session))
        try:
            made = cast(Made, await asyncio.wait_for(session.ordered.get(), 30))
            [error] = await asyncio.wait_for(frames(made), 30)
            assert isinstance(error, ServerError) and error.param == "voice"
            assert made.started.is_set()  # the writer is not left waiting
            end = await asyncio.wait_for(session.ordered.get(), 30)
            assert isinstance(end, UtteranceEnd) and (end.utterance, end.count) == (0, 1)
        finally:
            producer.cancel()

    client.portal.call(scenario)
