"""What the scheduler hands out: tasks (one unit of work for a sidecar), their tiers, and
batches (what one frame carries), with the estimate of a generation item's size.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, cast

from opentelemetry.context import Context

from sidecar.shared.duration import FRAME_RATE, target_tokens
from sidecar.shared.protocol import (
    Align,
    Aligned,
    AudioToHear,
    Encoded,
    EncodeVoice,
    Generate,
    Item,
    Result,
    Tier,
    Transcribe,
    Transcript,
    VoiceToEncode,
)
from supervisor.tracing import spans

STYLE_TOKENS = 16  # language and instruct markers around the text
CHARS_PER_TEXT_TOKEN = 2  # generous: BPE takes about four Latin characters per token


# Task kinds that run one to a batch, and the op of their frame.
SINGLE_OPS = {"encode": "encode_voice", "transcribe": "transcribe", "align": "align"}
# What a task's future resolves to: by kind, generate a `result`, encode an `encoded`,
# transcribe a `transcript`, align an `aligned` (the `submit...` methods' futures say which).
Answer = Result | Encoded | Transcript | Aligned


@dataclass(eq=False)
class Task:
    """One unit of work for a sidecar: a generation item, or a voice to encode."""

    id: str
    kind: str  # "generate", or one of SINGLE_OPS
    payload: Item | VoiceToEncode | AudioToHear  # an Item, or a single task's frame's fields
    tier: Tier
    est_audio_s: float
    est_tokens: int
    future: asyncio.Future[Any]  # its kind's Answer, as the `submit...` methods type it
    queued_at: float
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


@dataclass(eq=False)
class Batch:
    id: int
    kind: str
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
        """Its frame: a task's kind says its payload's type (an Item for "generate")."""
        if self.kind in SINGLE_OPS:
            (task,) = self.tasks
            frame = {"op": SINGLE_OPS[self.kind], "batch": self.id, "id": task.id, **task.payload}
            return cast("EncodeVoice | Transcribe | Align", frame)
        generate: Generate = {
            "op": "generate",
            "batch": self.id,
            "items": [cast(Item, t.payload) for t in self.tasks],
            "encoding": "s16le",
            "tier": self.tier,
        }
        return generate


def estimate(item: Item) -> tuple[float, int]:
    """(seconds of audio, tokens of work) for one item, from the reference duration rule."""
    text = item["text"]
    if item.get("duration"):
        frames = max(1, int(float(item["duration"]) * FRAME_RATE))  # type: ignore[arg-type]
    else:
        voice = item.get("voice")
        num_ref = voice["tokens"]["shape"][1] if voice else None
        frames = target_tokens(
            text, voice["ref_text"] if voice else None, num_ref, speed=item.get("speed")
        )
    ref_frames = item["voice"]["tokens"]["shape"][1] if item.get("voice") else 0  # type: ignore[index]
    return frames / FRAME_RATE, frames + ref_frames + STYLE_TOKENS + len(
        text
    ) // CHARS_PER_TEXT_TOKEN
