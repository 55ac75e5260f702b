"""`/v1/audio/speech/stream`: text in over a WebSocket, each sentence's audio out as it is made.

vLLM-Omni's protocol (message names kept, so its clients work). The client sends JSON text
frames: `session.config` (the speech request's fields but `input`, checked as a speech request
is; first, and again between utterances), `input.text` (text as it arrives), `input.done` (the
utterance ends: what is left is spoken; the session stays open) and `session.close`. The server
cuts the text into segments (`supervisor.speech.segmenter`), makes each as a speech request of
its own through the speech route's path (`speech.parse`, `service.start`: the same checks,
limits, lexicons and voices), and sends, in order: `audio.start`, the segment's audio as binary
frames (a whole file in the session's format), `audio.done`; after an utterance's last segment,
`session.done`. Anything malformed gets an `error` message and the session goes on.

Bounded: at most AHEAD segments are made ahead of the one being sent, so a client that does not
read holds the rest as text, and text past --stream-buffer-chars is refused (an `error`); the
sessions open at once, in all and per key; a session idle for --stream-idle-s is closed. A
client that goes away cancels its segments, queued or running. A sidecar that dies under a
segment costs that segment a retry (the scheduler runs the batch again), not the session.

Authentication (with API keys): the `Authorization: Bearer` header; or, for a browser, which
cannot set it, the key as `api_key` in the first `session.config`, before which nothing else is
accepted. A server without keys takes no browser handshake from another site (`Origin`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect

from supervisor.errors import InvalidRequest, ServerError
from supervisor.http import stream_access
from supervisor.http.routes import speech
from supervisor.services import Services
from supervisor.speech import delivery, service, words
from supervisor.speech.segmenter import Segmenter
from supervisor.tenants import OPEN, Tenant

AHEAD = 2  # segments made ahead of the one being sent
SEGMENT_CHARS = 300  # a run of text without a sentence end is cut at about this length
SESSION_FIELDS = frozenset({"type", "api_key", "stream_audio", "timestamp_granularities"})
POLICY = 1008  # close codes (RFC 6455): a refused key
TRY_LATER = 1013  # too many sessions

log = logging.getLogger("omnivoice.stream")


@dataclass
class Segment:
    text: str
    utterance: int
    index: int
    config: dict[str, Any]
    stream_audio: bool
    words: bool = False  # timestamp_granularities ["word"]: its words in audio.done


@dataclass
class UtteranceEnd:
    utterance: int
    count: int


@dataclass(eq=False)
class Made:
    """A segment being made: its audio as it is encoded, then None (done) or the error."""

    segment: Segment
    frames: asyncio.Queue[bytes | ServerError | None] = field(default_factory=asyncio.Queue)
    task: asyncio.Task[None] | None = None
    fmt: str = ""
    rate: int | None = None
    qa: str | None = None  # X-OmniVoice-QA's value for the segment
    words: list[Any] | None = None
    started: asyncio.Event = field(default_factory=asyncio.Event)


async def stream(ws: WebSocket) -> None:
    svc: Services = ws.app.state.services
    if stream_access.handshake_error(ws, svc) is not None:
        await ws.close(code=POLICY)  # before accepting: an HTTP 403
        return
    owner: Tenant | None = OPEN if not svc.settings.tenancy.by_key else None
    header = ws.headers.get("authorization")
    if owner is None and header is not None:
        scheme, _, token = header.partition(" ")
        owner = stream_access.key_tenant(svc, token.strip()) if scheme.lower() == "bearer" else None
        if owner is None:
            await ws.close(code=POLICY)
            return
    sessions = stream_access.sessions_of(ws)
    await ws.accept()
    session = Session(ws, svc, owner)
    full = sessions.full(svc, None) or sessions.full(svc, owner)
    if full is not None:
        await session.refuse(full)
        return
    sessions.total += 1
    session.counted = sessions.claim(owner) if owner is not None else None
    try:
        await session.run()
    finally:
        sessions.total -= 1
        sessions.release(session.counted)


class Session:
    def __init__(self, ws: WebSocket, svc: Services, owner: Tenant | None) -> None:
        self.ws, self.svc, self.owner = ws, svc, owner
        self.config: dict[str, Any] = {}
        self.stream_audio, self.timed_words = True, False
        self.segmenter = Segmenter(min(SEGMENT_CHARS, svc.settings.max_input_chars))
        self.utterance = 0
        self.count = 0  # segments of this utterance so far
        self.pending: deque[Segment | UtteranceEnd | None] = deque()  # None: close
        self.wake = asyncio.Event()
        self.ordered: asyncio.Queue[Made | UtteranceEnd | None] = asyncio.Queue()
        self.slots = asyncio.Semaphore(AHEAD + 1)
        self.made: set[Made] = set()
        self.send_lock = asyncio.Lock()
        self.busy = False  # a segment is being sent
        self.counted: str | None = None  # the key this session is counted against
        self.active_at = time.monotonic()  # the last message, or the last audio sent

    async def refuse(self, why: str) -> None:
        await self.error(why + "; try again later", "too_many_sessions")
        await self.ws.close(code=TRY_LATER)

    async def send(self, message: dict[str, Any] | bytes) -> None:
        async with self.send_lock:
            if isinstance(message, bytes):
                await self.ws.send_bytes(message)
            else:
                await self.ws.send_text(json.dumps(message))

    async def error(self, message: str, code: str | None = None, param: str | None = None) -> None:
        await self.send({"type": "error", "message": message, "code": code, "param": param})

    def buffered(self) -> int:
        queued = sum(len(s.text) for s in self.pending if isinstance(s, Segment))
        return queued + len(self.segmenter.text)

    def idle(self) -> bool:
        return not self.pending and self.ordered.empty() and not self.busy and not self.made

    async def run(self) -> None:
        """Until the client goes (what is queued for it is cancelled), idles out, or closes
        (what it asked for is sent first)."""
        producer, writer = (
            asyncio.ensure_future(self.produce()),
            asyncio.ensure_future(self.write()),
        )
        reader = asyncio.ensure_future(self.read())
        tasks = [reader, producer, writer]
        try:
            await asyncio.wait([reader, writer], return_when=asyncio.FIRST_COMPLETED)
            closing = reader.done() and not reader.cancelled() and reader.exception() is None
            if closing and reader.result():  # session.close: the writer closes after the last
                await asyncio.wait([writer])
        finally:
            for task in [*tasks, *(m.task for m in self.made if m.task)]:
                task.cancel()
            for task in tasks:
                try:
                    await task
                except (asyncio.CancelledError, WebSocketDisconnect, OSError, RuntimeError):
                    pass  # the client went away mid-send, or the task was cancelled above
                except Exception:
                    log.exception("a speech session failed")

    async def read(self) -> bool:
        """Messages until the client goes or idles out (False), or closes (True). Idle: no
        message for --stream-idle-s, and nothing sent or being made meanwhile."""
        idle_s = self.svc.settings.stream_idle_s or None
        while True:
            left = None if idle_s is None else self.active_at + idle_s - time.monotonic()
            try:
                message = await asyncio.wait_for(self.ws.receive(), left)
            except asyncio.TimeoutError:
                if not self.idle():
                    self.active_at = time.monotonic()
                elif time.monotonic() - self.active_at >= (idle_s or 0):
                    await self.error(f"nothing for {idle_s:g} s: the session is closed", "idle")
                    await self.ws.close()
                    return False
                continue
            self.active_at = time.monotonic()
            if message["type"] == "websocket.disconnect":
                return False
            verdict = await self.handle(message)
            if verdict is not None:
                return verdict

    async def handle(self, message: Mapping[str, Any]) -> bool | None:
        """One client frame; True once the client closes, False once the session is refused."""
        if message.get("text") is None:
            await self.error("send JSON text frames, not binary ones", "invalid_message")
            return None
        try:
            body = json.loads(message["text"])
        except ValueError:
            await self.error("this message is not valid JSON", "invalid_message")
            return None
        kind = body.get("type") if isinstance(body, dict) else None
        if self.owner is None:
            return await self.authenticate(body if kind == "session.config" else None)
        try:
            if kind == "session.config":
                self.configure(body)
            elif kind == "input.text":
                self.text(body)
            elif kind == "input.done":
                self.flush()
            elif kind == "session.close":
                self.flush(ending=False)
                self.queue(None)
                return True
            else:
                await self.error(
                    f"unknown message type {kind!r}: send session.config, "
                    "input.text, input.done or session.close",
                    "invalid_message",
                    "type",
                )
        except ServerError as exc:
            await self.error(exc.message, exc.code, exc.param)
        return None

    async def authenticate(self, config: dict[str, Any] | None) -> bool | None:
        """A key in the first session.config (a browser's way); a wrong one ends the session."""
        if config is None:
            await self.error(
                "send the API key first: a session.config with 'api_key'",
                "invalid_api_key",
                "api_key",
            )
            return None
        key = config.get("api_key")
        owner = stream_access.key_tenant(self.svc, key) if isinstance(key, str) else None
        if owner is None:
            await self.error("a valid API key is required", "invalid_api_key", "api_key")
            await self.ws.close(code=POLICY)
            return False
        sessions = stream_access.sessions_of(self.ws)
        full = sessions.full(self.svc, owner)
        if full is not None:
            await self.refuse(full)
            return False
        self.owner, self.counted = owner, sessions.claim(owner)
        return await self.handle({"text": json.dumps(config)})

    def configure(self, body: dict[str, Any]) -> None:
        if self.count or self.segmenter.text.strip():
            raise InvalidRequest(
                "session.config comes between utterances: end this one with input.done first",
                param="type",
            )
        if "input" in body:
            raise InvalidRequest(
                "the text comes in input.text messages, not in session.config", param="input"
            )
        stream_audio = body.get("stream_audio", True)
        if not isinstance(stream_audio, bool):
            raise InvalidRequest("'stream_audio' must be true or false", param="stream_audio")
        timed_words = words.wants_words(body, self.svc.asr)
        config = {k: v for k, v in body.items() if k not in SESSION_FIELDS}
        assert self.owner is not None
        speech.parse(self.svc, self.owner, {**config, "input": "A sentence."})  # a 400 here
        self.config, self.stream_audio, self.timed_words = config, stream_audio, timed_words

    def text(self, body: dict[str, Any]) -> None:
        text = body.get("text")
        if not isinstance(text, str):
            raise InvalidRequest("input.text needs 'text', a string", param="text")
        limit = self.svc.settings.stream_buffer_chars
        if self.buffered() + len(text) > limit:
            error = InvalidRequest(
                f"this session holds {limit} characters not yet spoken "
                "already; this text is dropped: read the audio, then send "
                "more",
                param="text",
            )
            error.code = "buffer_full"
            raise error
        for segment in self.segmenter.feed(text):
            self.add(segment)

    def add(self, text: str) -> None:
        self.queue(
            Segment(
                text, self.utterance, self.count, self.config, self.stream_audio, self.timed_words
            )
        )
        self.count += 1

    def flush(self, ending: bool = True) -> None:
        """The rest of the text as a segment; the utterance ends (with `ending`, even empty)."""
        for segment in self.segmenter.flush():
            self.add(segment)
        if ending or self.count:
            self.queue(UtteranceEnd(self.utterance, self.count))
            self.utterance, self.count = self.utterance + 1, 0

    def queue(self, item: Segment | UtteranceEnd | None) -> None:
        self.pending.append(item)
        self.wake.set()

    async def produce(self) -> None:
        """Start each segment once one of the AHEAD slots is free; pass markers on in order."""
        while True:
            while not self.pending:
                self.wake.clear()
                await self.wake.wait()
            item = self.pending[0]
            if isinstance(item, Segment):
                await self.slots.acquire()
                made = Made(item)
                made.task = asyncio.ensure_future(self.make(made))
                self.made.add(made)
                self.pending.popleft()
                await self.ordered.put(made)
            else:
                self.pending.popleft()
                await self.ordered.put(item)

    async def make(self, made: Made) -> None:
        """A segment through the speech route's path, its audio encoded into `frames`."""
        synthesis = None
        assert self.owner is not None
        try:
            body = {**made.segment.config, "input": made.segment.text}
            request, voice = speech.parse(self.svc, self.owner, body)
            synthesis = await service.start(
                self.svc, self.owner, request, voice, first_short=not made.segment.index
            )
            timeout_s = request.request_timeout_s or self.svc.settings.request_timeout_s
            pcm: list[bytes] = []
            pieces = words.kept(speech.Deadline(timeout_s).pieces(synthesis.pieces()), pcm)
            first = await pieces.__anext__()
            fmt, wanted = request.response_format, delivery.profile(request)
            made.fmt, made.rate = fmt, wanted.rate(fmt, first.sample_rate)
            made.started.set()
            async for data in service.encoded(first, pieces, fmt, wanted):
                made.frames.put_nowait(data)
            made.qa = synthesis.verdict.header()
            if made.segment.words and self.svc.asr is not None:
                made.words = await words.pcm_words(
                    self.svc.asr,
                    pcm,
                    first.sample_rate,
                    made.segment.text,
                    request.language,
                    request.tier,
                    self.svc.settings.asr_timeout_s,
                )
            made.frames.put_nowait(None)
        except ServerError as exc:
            made.frames.put_nowait(exc)
        except Exception as exc:  # a bug: this segment fails, the session goes on
            log.exception("segment %d of a speech session failed", made.segment.index)
            made.frames.put_nowait(ServerError(f"internal server error: {type(exc).__name__}"))
        finally:
            made.started.set()
            if synthesis is not None:
                synthesis.close()

    async def write(self) -> None:
        """Each segment's messages and audio, in order; session.done after each utterance."""
        while True:
            item = await self.ordered.get()
            if item is None:
                await self.ws.close()
                return
            if isinstance(item, UtteranceEnd):
                await self.send(
                    {
                        "type": "session.done",
                        "utterance_index": item.utterance,
                        "total_sentences": item.count,
                    }
                )
                continue
            self.busy = True
            try:
                await self.send_segment(item)
            finally:
                self.busy = False
                self.active_at = time.monotonic()
                self.made.discard(item)
                self.slots.release()

    async def send_segment(self, made: Made) -> None:
        segment = made.segment
        await made.started.wait()
        fmt = (
            made.fmt
            or segment.config.get("response_format")
            or self.svc.settings.default_response_format
        )
        await self.send(
            {
                "type": "audio.start",
                "utterance_index": segment.utterance,
                "sentence_index": segment.index,
                "sentence_text": segment.text,
                "format": fmt,
                "sample_rate": made.rate,
            }
        )
        total, held, error = 0, bytearray(), None
        while (data := await made.frames.get()) is not None:
            if isinstance(data, ServerError):
                error = data.message
                break
            total += len(data)
            if self.stream_audio and segment.stream_audio:
                await self.send(data)
            else:
                held += data
        if held:
            await self.send(bytes(held))
        await self.send(
            {
                "type": "audio.done",
                "utterance_index": segment.utterance,
                "sentence_index": segment.index,
                "total_bytes": total,
                "error": error,
                "qa": made.qa,
                **({"words": made.words} if made.words is not None else {}),
            }
        )
