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
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any, ParamSpec, TypeVar

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from supervisor import formats, instructions, metrics, schemas
from supervisor.api import Services, services
from supervisor.errors import InvalidRequest, RequestTimeout, ServerError, UnsupportedMedia
from supervisor.schemas import SpeechRequest
from supervisor.synthesis import Synthesis, Voice
from supervisor.voice_store import resolve_voice

T = TypeVar("T")
P = ParamSpec("P")
CLIENT_CLOSED = 499  # nginx's "client closed request": only ever seen in logs and metrics


class ClientGone(Exception):
    """The client disconnected before its answer started."""


async def read_json(request: Request, parse: Callable[[bytes], Any] = json.loads) -> Any:
    """The body as JSON (read by `parse`, in a worker thread). Multipart is a 415 (the forms are
    other routes); undecodable, or text that is not valid Unicode, is a 400."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type.startswith("multipart/"):
        raise UnsupportedMedia(
            f"this route takes a JSON body (Content-Type: application/json), not {content_type}"
        )
    body = await request.body()
    try:
        parsed = await asyncio.to_thread(parse, body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise InvalidRequest(
            "We could not parse the JSON body of your request: it is not valid JSON."
        ) from None
    schemas.refuse_unencodable(parsed)
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
            raise RequestTimeout(f"the request was not done within its request_timeout_s of {self.timeout_s:g} s; "
                                 "what was left of it is cancelled") from None  # fmt: skip

    async def pieces(
        self, pieces: AsyncGenerator[dict[str, Any], None]
    ) -> AsyncGenerator[dict[str, Any], None]:
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
        synthesis: Synthesis,
        content: AsyncIterator[bytes],
        media_type: str,
        headers: dict[str, str],
    ) -> None:
        super().__init__(content, media_type=media_type, headers=headers)
        self.synthesis = synthesis

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.synthesis.close()


async def _encode(fmt: str, call: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run an encoder step; the compressed formats in a worker thread, off the event loop."""
    if formats.is_cheap(fmt):
        return call(*args, **kwargs)
    return await asyncio.to_thread(call, *args, **kwargs)


async def _audio_body(
    first: dict[str, Any], rest: AsyncIterator[dict[str, Any]], fmt: str
) -> AsyncIterator[bytes]:
    encoder = await _encode(fmt, formats.encoder, fmt, first["sample_rate"])
    yield await _encode(fmt, encoder.feed, first["audio"])
    async for piece in rest:
        data = await _encode(fmt, encoder.feed, piece["audio"])
        if data:
            yield data
    tail = await _encode(fmt, encoder.finish)
    if tail:
        yield tail


async def _sse_body(
    first: dict[str, Any], rest: AsyncIterator[dict[str, Any]], fmt: str, synthesis: Synthesis
) -> AsyncIterator[bytes]:
    try:
        async for data in _audio_body(first, rest, fmt):
            for event in formats.sse_deltas(data):
                yield event
    except ServerError as exc:
        yield formats.sse_error(exc.to_body())
        return
    yield formats.sse_done(synthesis.usage())


async def respond(request: Request, svc: Services, speech: SpeechRequest, voice: Voice) -> Response:
    """Admit the request, wait for its first audio, and answer as its formats ask."""
    synthesis = Synthesis(svc.scheduler, speech, voice, svc.settings.chunk_s)
    deadline = Deadline(speech.request_timeout_s or svc.settings.request_timeout_s)
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
    fmt = speech.response_format
    rate = str(
        first["sample_rate"]
    )  # X-Audio-Sample-Rate: the same, under omnivoice-triton-server's name
    headers = {
        "X-Seed": str(synthesis.seed),
        "X-Chunks": str(len(synthesis.chunks)),
        "X-Sample-Rate": rate,
        "X-Audio-Sample-Rate": rate,
    }
    if speech.instructions_read is not None:
        headers[instructions.HEADER] = speech.instructions_read
    if speech.stream_format == "sse":
        headers["Cache-Control"] = "no-cache"
        return SynthesisStream(
            synthesis, _sse_body(first, pieces, fmt, synthesis), "text/event-stream", headers
        )
    if len(synthesis.chunks) > 1:
        return SynthesisStream(
            synthesis, _audio_body(first, pieces, fmt), formats.MEDIA_TYPES[fmt], headers
        )
    await pieces.aclose()
    content = await _encode(fmt, formats.encode, fmt, first["audio"], first["sample_rate"])
    return Response(content, media_type=formats.MEDIA_TYPES[fmt], headers=headers)


async def speech(request: Request) -> Response:
    svc = services(request)
    body = await read_json(request)
    speech_request = schemas.speech_request(body, svc.settings)
    return await respond(request, svc, speech_request, resolve_voice(speech_request, svc.voices))
