"""The result cache on the speech routes: a reproducible request (one with a `seed`) that is
found is answered from disk, with no sidecar and no admission; one that is not found is kept
once its whole answer has gone out (a failed or cut answer is not kept). `X-Cache` says which.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

from starlette.responses import Response

from supervisor.services import Services
from supervisor.speech.audio import formats
from supervisor.speech.checks import quality
from supervisor.speech.request import instructions
from supervisor.speech.request.schemas import SpeechRequest
from supervisor.speech.request.voice import Voice
from supervisor.speech.stores import result_cache
from supervisor.speech.stores.result_cache import CachedResult, CacheMeta
from supervisor.speech.stores.single_flight import Flight, Flights
from supervisor.speech.synthesis.runner import usage
from supervisor.speech.text import chunking

HEADER = "X-Cache"
_writing: set[asyncio.Task[None]] = set()  # puts in flight, held so they are not collected
FLIGHTS = Flights()  # identical reproducible requests in flight, made once


async def find(
    svc: Services, speech: SpeechRequest, voice: Voice, owner: str
) -> tuple[str | None, CachedResult | None]:
    """(key, entry) of `owner`'s request: key None when the answer is not to be cached; entry
    None on a miss."""
    cache = svc.results
    if cache is None or not result_cache.cacheable(speech):
        return None, None
    # An answer that starts with a short chunk (SSE, raw pcm: `chunking.starts_short`) has audio
    # of its own; the pcm bytes of an SSE answer and of a pcm stream are the same.
    short = chunking.starts_short(speech.stream_format, speech.response_format)
    route = "speech-sse" if short else "speech"
    name = result_cache.key(cache.identity, speech, voice, svc.settings.speech, route, owner)
    return name, await asyncio.to_thread(cache.get, name)


def replay(speech: SpeechRequest, entry: CachedResult) -> Response:
    """A cached answer, with the headers it had."""
    meta = entry.meta
    rate = str(meta["sample_rate"])
    headers = {
        "X-Seed": str(meta["seed"]),
        "X-Chunks": str(meta["chunks"]),
        "X-Sample-Rate": rate,
        "X-Audio-Sample-Rate": rate,
        HEADER: "hit",
    }
    qa = meta.get("qa")
    if isinstance(qa, str):  # the verdict it had (only passing answers are kept)
        headers[quality.HEADER] = qa
    if speech.instructions_read is not None:
        headers[instructions.HEADER] = speech.instructions_read
    if speech.stream_format == "sse":
        headers["Cache-Control"] = "no-cache"
        events = b"".join(formats.sse_deltas(entry.data))
        done = formats.sse_done(usage(speech.input, meta["audio_s"]))
        return Response(events + done, media_type="text/event-stream", headers=headers)
    return Response(
        entry.data, media_type=formats.MEDIA_TYPES[speech.response_format], headers=headers
    )


def keep(svc: Services, name: str, data: bytes, meta: CacheMeta, flight: Flight) -> None:
    """Answer the requests waiting on `flight` with this answer, and store it in a worker
    thread without holding it up (put never raises); the flight ends once it is stored."""
    entry = CachedResult(data, meta)
    flight.land(entry)
    cache = svc.results
    if cache is None:
        flight.release()
        return
    task = asyncio.ensure_future(asyncio.to_thread(cache.put, name, entry))
    _writing.add(task)
    task.add_done_callback(_writing.discard)
    task.add_done_callback(lambda _: flight.release())


async def recorded(
    body: AsyncIterator[bytes], done: Callable[[bytes], None]
) -> AsyncIterator[bytes]:
    """The body as it streams; once all of it has been sent, `done` gets it whole."""
    parts: list[bytes] = []
    async for data in body:
        parts.append(data)
        yield data
    done(b"".join(parts))
