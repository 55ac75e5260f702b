"""`POST /v1/audio/speech`: validate, admit, await or stream, encode.

The response waits for the first chunk's audio before it starts, so that anything that fails
early (bad input the sidecar caught, a poison request, no device) still gets its own status.
Then:

- one chunk: the whole file, with Content-Length (a WAV header with the real sizes);
- several chunks (`stream_format: "audio"`): chunked transfer, each chunk's audio sent as soon
  as it is ready, through one encoder for the whole response (a WAV header says "until the
  end"); a chunk that fails later cuts the connection, so a client never takes a truncated
  file for a whole one;
- `stream_format: "sse"`: `speech.audio.delta` events with base64 audio in the requested format,
  then `speech.audio.done` with usage; a chunk that fails later sends an `error` event.

A client that goes away cancels everything of its request still queued or running, and so
does a request's deadline (`request_timeout_s`, else `--request-timeout-s`): a 504 if no audio
has gone out yet, else the stream ends as a failed chunk would end it.

Quality (supervisor/speech/checks/quality.py): `X-OmniVoice-QA: passed|failed; attempts=N`. A whole answer
(one chunk) that still fails its checks after every retry is sent all the same, with `failed`:
the audio exists, the client is told, and may keep it or ask again with another seed. A stream
sends the header with its first chunk; if that said `passed`, a later chunk that finally fails
ends the stream as a failed chunk would (an SSE `error` event with code `qa_failed`, else a cut
connection), so failing audio is never passed off as good.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Message, Receive, Scope, Send

from supervisor import metrics
from supervisor.errors import (
    InvalidRequest,
    QualityFailed,
    RequestTimeout,
    ServerError,
    UnsupportedMedia,
)
from supervisor.http import stream_cut
from supervisor.http.auth import tenant
from supervisor.http.routes import cached, services
from supervisor.services import Services
from supervisor.speech.audio import delivery, formats
from supervisor.speech.audio.chunk_audio import ChunkAudio
from supervisor.speech.checks import quality
from supervisor.speech.request import field_checks, instructions, schemas
from supervisor.speech.request.schemas import SpeechRequest
from supervisor.speech.request.voice import Voice
from supervisor.speech.stores.single_flight import Flight
from supervisor.speech.synthesis import steps
from supervisor.speech.synthesis.runner import SynthesisRun
from supervisor.speech.text import chunking
from supervisor.tenants import Tenant

T = TypeVar("T")
CLIENT_CLOSED = 499  # nginx's "client closed request": only ever seen in logs and metrics


class ClientGone(Exception):
    """The client disconnected before its answer started."""


def streamed(speech: SpeechRequest) -> bool:
    """Whether the answer is played as it comes (SSE, raw pcm), so its first chunk is made
    short (`chunking.starts_short`)."""
    return chunking.starts_short(speech.stream_format, speech.response_format)


async def read_json(
    request: Request, parse: Callable[[bytes], Any] = field_checks.json_loads
) -> Any:
    """The body as JSON (read by `parse`, in a worker thread). Any other Content-Type is a 415:
    text/plain, a form or none at all is what a page on another site can send without asking,
    so a server without keys must not read those. Undecodable, or text that is not valid
    Unicode, is a 400."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "application/json":
        raise UnsupportedMedia(
            "this route takes a JSON body: send Content-Type: application/json (curl: --json, "
            f"or -H 'Content-Type: application/json' with -d), not {content_type or 'none'}",
            param="Content-Type",
        )
    body = await request.body()
    try:
        parsed = await asyncio.to_thread(parse, body)
    except RecursionError:  # valid JSON, deeper than any request of ours is
        raise InvalidRequest(
            "We could not parse the JSON body of your request: it is nested too deeply."
        ) from None
    except (ValueError, UnicodeDecodeError):
        raise InvalidRequest(
            "We could not parse the JSON body of your request: it is not valid JSON."
        ) from None
    field_checks.refuse_unencodable(parsed)
    return parsed


async def until_disconnected(request: Request, work: Awaitable[T]) -> T:
    """Await work, unless the client disconnects first: then cancel it and raise ClientGone."""
    task = asyncio.ensure_future(work)

    async def disconnected() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass

    watch = asyncio.ensure_future(disconnected())
    try:
        await asyncio.wait((task, watch), return_when=asyncio.FIRST_COMPLETED)
    finally:
        watch.cancel()
    if task.done():
        return task.result()
    task.cancel()
    raise ClientGone()


class Deadline:
    """A request's deadline: awaiting past it cancels what is awaited and raises RequestTimeout."""

    def __init__(self, timeout_s: float | None) -> None:
        self.timeout_s = timeout_s
        self.at = time.monotonic() + timeout_s if timeout_s else None

    async def __call__(self, work: Awaitable[T]) -> T:
        if self.at is None:
            return await work
        try:
            return await asyncio.wait_for(work, max(0.0, self.at - time.monotonic()))
        except asyncio.TimeoutError:
            raise RequestTimeout(
                f"the request was not done within its request_timeout_s of {self.timeout_s:g} s; "
                "what was left of it is cancelled"
            ) from None

    async def pieces(
        self, pieces: AsyncGenerator[ChunkAudio, None]
    ) -> AsyncGenerator[ChunkAudio, None]:
        """The pieces, each awaited within the deadline; closing this closes them."""
        try:
            while True:
                try:
                    piece = await self(pieces.__anext__())
                except StopAsyncIteration:
                    return
                yield piece
        finally:
            await pieces.aclose()


class SynthesisStream(StreamingResponse):
    """A streamed answer that cancels its synthesis however it ends (done, failed, disconnected)."""

    def __init__(
        self,
        synthesis: SynthesisRun,
        content: AsyncIterator[bytes],
        media_type: str,
        headers: dict[str, str],
    ) -> None:
        super().__init__(content, media_type=media_type, headers=headers)
        self.synthesis = synthesis
        self.on_end: Callable[[], None] | None = None  # called last, however it ended

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False

        async def noting(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await super().__call__(scope, receive, noting)
        except ServerError as exc:
            if not started:
                raise
            stream_cut.cut(scope, exc)  # one line; returning unfinished cuts the connection
        finally:
            self.synthesis.close()
            if self.on_end is not None:
                self.on_end()


async def _rest(pieces: AsyncIterator[ChunkAudio]) -> list[ChunkAudio]:
    return [piece async for piece in pieces]


async def _once(data: bytes) -> AsyncIterator[bytes]:
    yield data


async def _sse_body(audio: AsyncIterator[bytes], synthesis: SynthesisRun) -> AsyncIterator[bytes]:
    try:
        async for data in audio:
            for event in formats.sse_deltas(data):
                yield event
    except ServerError as exc:
        yield formats.sse_error(exc.to_body())
        return
    yield formats.sse_done(synthesis.usage())


async def _passing(
    pieces: AsyncIterator[ChunkAudio], synthesis: SynthesisRun
) -> AsyncIterator[ChunkAudio]:
    """The later pieces of a stream whose header said `passed`; one that failed raises."""
    async for piece in pieces:
        if quality.failed_checks(piece.qa):
            raise QualityFailed(synthesis.verdict.reason())
        yield piece


async def respond(request: Request, svc: Services, speech: SpeechRequest, voice: Voice) -> Response:
    """Answer a request. A reproducible one is answered from the result cache when it is there,
    or with the audio of an identical one in flight once that is done (single_flight.py);
    else it is made, and kept."""
    name, hit = await cached.find(svc, speech, voice, tenant(request).owner)
    if hit is not None:
        return cached.replay(speech, hit)
    deadline = Deadline(speech.request_timeout_s or svc.settings.http.request_timeout_s)
    if name is None:
        return await _make(request, svc, speech, voice, deadline, None)
    while (ahead := cached.FLIGHTS.flying(name)) is not None:
        try:
            shared = await until_disconnected(request, deadline(ahead.result()))
        except ClientGone:
            return Response(status_code=CLIENT_CLOSED)
        if shared is not None:
            return cached.replay(speech, shared)
    flight = cached.FLIGHTS.lead(name)
    try:
        response = await _make(request, svc, speech, voice, deadline, flight)
    except BaseException:
        flight.land(None)
        raise
    if isinstance(response, SynthesisStream):  # it lands with its audio once all of it went out
        response.on_end = lambda: flight.land(None)
    else:  # it landed with its audio already, if it had any to share
        flight.land(None)
    return response


async def _make(
    request: Request,
    svc: Services,
    speech: SpeechRequest,
    voice: Voice,
    deadline: Deadline,
    flight: Flight | None,
) -> Response:
    """Admit the request, wait for its first audio, and answer as its formats ask; a
    reproducible answer (`flight` given) is shared with its waiters and kept."""
    synthesis = await steps.start(svc, tenant(request), speech, voice, first_short=streamed(speech))
    pieces = deadline.pieces(synthesis.pieces())
    try:
        first = await until_disconnected(request, pieces.__anext__())
    except ClientGone:
        synthesis.close()
        return Response(status_code=CLIENT_CLOSED)
    except BaseException:
        synthesis.close()
        raise
    started = request.scope.get(metrics.STARTED_KEY)
    if started is not None:
        metrics.first_audio.observe(time.monotonic() - started)
    fmt, wanted = speech.response_format, delivery.profile(speech)
    rate = wanted.rate(fmt, first.sample_rate)
    headers = _headers(synthesis, rate, flight)
    rest = _passing(pieces, synthesis) if synthesis.verdict.passed else pieces
    keep = _keeper(svc, synthesis, rate, flight)
    if wanted.loudness is not None:
        return await _loud(request, synthesis, first, rest, headers, keep)
    body = steps.encoded(first, rest, fmt, wanted)
    if flight is not None:
        body = cached.recorded(body, keep)
    if speech.stream_format == "sse":
        headers["Cache-Control"] = "no-cache"
        return SynthesisStream(synthesis, _sse_body(body, synthesis), "text/event-stream", headers)
    if len(synthesis.chunks) > 1:
        return SynthesisStream(synthesis, body, formats.MEDIA_TYPES[fmt], headers)
    await pieces.aclose()
    content = await steps.encode_whole(fmt, first.audio, first.sample_rate, wanted)
    keep(content)
    return Response(content, media_type=formats.MEDIA_TYPES[fmt], headers=headers)


def _headers(synthesis: SynthesisRun, rate: int, flight: Flight | None) -> dict[str, str]:
    """A made answer's headers, known once its first audio is in (`rate`: the file's)."""
    # X-Audio-Sample-Rate: the same, under omnivoice-triton-server's name
    headers = {
        "X-Seed": str(synthesis.seed),
        "X-Chunks": str(len(synthesis.chunks)),
        "X-Sample-Rate": str(rate),
        "X-Audio-Sample-Rate": str(rate),
        quality.HEADER: synthesis.verdict.header(),
    }
    if synthesis.request.instructions_read is not None:
        headers[instructions.HEADER] = synthesis.request.instructions_read
    if flight is not None:
        headers[cached.HEADER] = "miss"
    return headers


def _keeper(
    svc: Services, synthesis: SynthesisRun, rate: int, flight: Flight | None
) -> Callable[[bytes], None]:
    """What keeps a whole answer once it is made: in the result cache and for the requests
    waiting on `flight`, when there is one."""

    def keep(data: bytes) -> None:
        # Only audio that passed its checks is kept: a failed answer is asked for again, and
        # one the ASR sidecar did not hear is heard next time.
        if flight is not None and synthesis.verdict.passed and not synthesis.verdict.asr_skipped:
            fmt = synthesis.request.response_format
            meta = steps.cache_meta(synthesis, fmt, rate, synthesis.verdict.header())
            cached.keep(svc, flight.key, data, meta, flight)

    return keep


async def _loud(
    request: Request,
    synthesis: SynthesisRun,
    first: ChunkAudio,
    rest: AsyncIterator[ChunkAudio],
    headers: dict[str, str],
    keep: Callable[[bytes], None],
) -> Response:
    """An answer with a loudness target, measured over the whole output: every chunk first,
    then one file."""
    try:
        whole = await until_disconnected(request, _rest(rest))
    except ClientGone:
        return Response(status_code=CLIENT_CLOSED)
    finally:
        synthesis.close()
    speech, pcm = synthesis.request, b"".join(piece.audio for piece in [first, *whole])
    fmt = speech.response_format
    content = await steps.encode_whole(fmt, pcm, first.sample_rate, delivery.profile(speech))
    keep(content)
    if speech.stream_format == "sse":
        headers["Cache-Control"] = "no-cache"
        return SynthesisStream(
            synthesis, _sse_body(_once(content), synthesis), "text/event-stream", headers
        )
    return Response(content, media_type=formats.MEDIA_TYPES[fmt], headers=headers)


async def speech(request: Request) -> Response:
    svc = services(request)
    speech_request, voice = parse(svc, tenant(request), await read_json(request))
    return await respond(request, svc, speech_request, voice)


def parse(svc: Services, owner: Tenant, body: Any) -> tuple[SpeechRequest, Voice]:
    """A speech request's body, checked (a 400 raised here), and the voice it names."""
    speech_request = schemas.speech_request(body, svc.settings.speech)
    return speech_request, steps.voice(svc, owner, speech_request)
