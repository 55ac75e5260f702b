"""What the scheduler hands out: tasks (one unit of work for a sidecar), their tiers, and
batches (what one frame carries), with the estimate of a generation item's size.

A task's class is its kind: a `Generation` carries an `Item` and its future resolves to a
`result`; an `Encoding` a voice to encode (an `encoded`), a `Transcription` and an `Alignment`
audio to hear (a `transcript`, an `aligned`). The last three run one to a batch.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import ClassVar, Generic, Literal, TypeVar

from opentelemetry.context import Context

from sidecar.shared.duration import FRAME_RATE, target_tokens
from sidecar.shared.protocol import (
    Align,
    Aligned,
    AsrAudio,
    Encoded,
    EncodeVoice,
    Generate,
    Item,
    ProtocolError,
    Result,
    Tier,
    Transcribe,
    Transcript,
    VoiceToEncode,
)
from supervisor.tracing import spans

STYLE_TOKENS = 16  # language and instruct markers around the text
CHARS_PER_TEXT_TOKEN = 2  # generous: BPE takes about four Latin characters per token

Kind = Literal["generate", "encode", "transcribe", "align"]
# What a sidecar answers a task with, one message type per kind.
Answer = Result | Encoded | Transcript | Aligned

P = TypeVar("P", Item, VoiceToEncode, AsrAudio)  # what the task carries
A = TypeVar("A", Result, Encoded, Transcript, Aligned)  # what its future resolves to


@dataclass(eq=False, kw_only=True)
class Work(Generic[P, A]):
    """One unit of work for a sidecar; a subclass per kind says its payload and its answer."""

    kind: ClassVar[Kind]
    answers: ClassVar[str]  # the op of the message that answers it

    id: str
    payload: P  # an Item, or a single task's frame's fields
    tier: Tier
    # made where it is admitted, in the event loop
    future: asyncio.Future[A] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )
    queued_at: float = field(default_factory=time.monotonic)  # since when it waits for a sidecar
    est_audio_s: float = 0.0
    est_tokens: int = 1
    kills: list[str] = field(default_factory=list)  # reasons of the killed batches it ran in
    answered: bool = False  # the sidecar sent its result or error
    # Where its spans go: the context it was made in (the request's), and its `batch` span's
    # once answered (supervisor/tracing/batches.py).
    trace: Context = field(default_factory=spans.current)
    batch_trace: Context | None = None
    owner: str = ""  # whose work it is (an API key's owner id): shares are fair between owners

    @property
    def alone(self) -> bool:
        """In two killed batches: from now on it runs in a batch of its own."""
        return len(self.kills) >= 2

    @property
    def done(self) -> bool:
        return self.future.done()

    def mismatch(self, message: Answer) -> ProtocolError:
        return ProtocolError(f"{message['op']} for {self.id}, a task to {self.kind}")


@dataclass(eq=False, kw_only=True)
class Generation(Work[Item, Result]):
    kind: ClassVar[Kind] = "generate"
    answers: ClassVar[str] = "result"

    def resolve(self, message: Answer) -> None:
        if message["op"] != "result":
            raise self.mismatch(message)
        self.future.set_result(message)


@dataclass(eq=False, kw_only=True)
class Encoding(Work[VoiceToEncode, Encoded]):
    kind: ClassVar[Kind] = "encode"
    answers: ClassVar[str] = "encoded"

    def resolve(self, message: Answer) -> None:
        if message["op"] != "encoded":
            raise self.mismatch(message)
        self.future.set_result(message)


@dataclass(eq=False, kw_only=True)
class Transcription(Work[AsrAudio, Transcript]):
    kind: ClassVar[Kind] = "transcribe"
    answers: ClassVar[str] = "transcript"

    def resolve(self, message: Answer) -> None:
        if message["op"] != "transcript":
            raise self.mismatch(message)
        self.future.set_result(message)


@dataclass(eq=False, kw_only=True)
class Alignment(Work[AsrAudio, Aligned]):
    kind: ClassVar[Kind] = "align"
    answers: ClassVar[str] = "aligned"

    def resolve(self, message: Answer) -> None:
        if message["op"] != "aligned":
            raise self.mismatch(message)
        self.future.set_result(message)


Task = Generation | Encoding | Transcription | Alignment


@dataclass(eq=False)
class Batch:
    id: int
    kind: Kind
    tasks: list[Task]
    sent_at: float = 0.0
    started: bool = False  # a frame of it has been seen
    denoised: bool = False  # the sidecar said the device is past its steps (`denoised`)
    audio_s: float = 0.0  # audio generated so far
    # The tier it runs at in the sidecar: INTERACTIVE (interactive tasks sent beside bulk work)
    # may join the batch being denoised at its next step; BULK runs in turn, whatever its tasks.
    tier: Tier = Tier.BULK

    def task(self, task_id: str) -> Task | None:
        return next((t for t in self.tasks if t.id == task_id), None)

    def pending(self) -> list[Task]:
        return [t for t in self.tasks if not t.done]

    def frame(self) -> Generate | EncodeVoice | Transcribe | Align:
        """Its frame: one task's for a single kind, every item for a generation."""
        match self.tasks:
            case [Encoding() as task]:
                return {"op": "encode_voice", "batch": self.id, "id": task.id, **task.payload}
            case [Transcription() as task]:
                return {"op": "transcribe", "batch": self.id, "id": task.id, **task.payload}
            case [Alignment() as task]:
                return {"op": "align", "batch": self.id, "id": task.id, **task.payload}
        items = [t.payload for t in self.tasks if isinstance(t, Generation)]
        if len(items) != len(self.tasks):
            raise TypeError(f"batch {self.id} mixes generation items with other tasks")
        return {
            "op": "generate",
            "batch": self.id,
            "items": items,
            "encoding": "s16le",
            "tier": self.tier,
        }


def estimate(item: Item) -> tuple[float, int]:
    """(seconds of audio, tokens of work) for one item, from the reference duration rule."""
    text, voice, duration = item["text"], item.get("voice"), item.get("duration")
    ref_frames = voice["tokens"]["shape"][1] if voice else 0
    if duration:
        frames = max(1, int(duration * FRAME_RATE))
    else:
        frames = target_tokens(
            text,
            voice["ref_text"] if voice else None,
            ref_frames if voice else None,
            speed=item.get("speed"),
        )
    return frames / FRAME_RATE, frames + ref_frames + STYLE_TOKENS + len(
        text
    ) // CHARS_PER_TEXT_TOKEN
