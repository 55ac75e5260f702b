"""A WebSocket speech session's state, shared by its reader, producer and writer.

The reader cuts the client's text into `Segment`s and queues them (`pending`, with an
`UtteranceEnd` after each utterance and None once the client closes); the producer starts each
as a `Made` once one of the AHEAD + 1 `slots` is free and passes it on in order (`ordered`); the
writer sends each and frees its slot. Every message out goes through `send`, one at a time.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from starlette.websockets import WebSocket

from supervisor.errors import ServerError
from supervisor.services import Services
from supervisor.speech.text.segmenter import Segmenter
from supervisor.tenants import Tenant

AHEAD = 2  # segments made ahead of the one being sent
SEGMENT_CHARS = 300  # a run of text without a sentence end is cut at about this length
POLICY = 1008  # close codes (RFC 6455): a refused key
TRY_LATER = 1013  # too many sessions


@dataclass
class Segment:
    text: str
    utterance: int
    index: int
    config: dict[str, object]
    stream_audio: bool
    words: bool = False  # timestamp_granularities ["word"]: its words in audio.done
    hold_for_checks: bool = False  # its audio waits for the ASR round trip


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
    trace_id: str | None = None  # its spans' (a trace of its own), in audio.done


class Session:
    def __init__(self, ws: WebSocket, svc: Services, owner: Tenant | None) -> None:
        self.ws, self.svc, self.owner = ws, svc, owner
        self.config: dict[str, object] = {}
        self.stream_audio, self.timed_words, self.hold_for_checks = True, False, False
        self.refused: ServerError | None = None  # the last session.config's error: no speech
        self.segmenter = Segmenter(min(SEGMENT_CHARS, svc.settings.http.max_input_chars))
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
        self.active_at = time.monotonic()  # the last message taken, or the last audio sent
        # Without a key yet: the time by which it must show one (--stream-auth-s).
        self.key_by = None if owner else self.active_at + svc.settings.http.stream_auth_s
        self.evicted = False  # closed without a key: newer sessions without one needed its place
        self.reader: asyncio.Future[bool] | None = None

    def evict(self) -> None:
        self.evicted = True
        if self.reader is not None:
            self.reader.cancel()

    async def refuse(self, why: str) -> None:
        await self.error(why + "; try again later", "too_many_sessions")
        await self.ws.close(code=TRY_LATER)

    async def send(self, message: dict[str, object] | bytes) -> None:
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

    def add(self, text: str) -> None:
        self.queue(
            Segment(
                text,
                self.utterance,
                self.count,
                self.config,
                self.stream_audio,
                self.timed_words,
                self.hold_for_checks,
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
