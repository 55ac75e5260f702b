"""The ASR sidecar's work: audio transcribed (and compared with the text read), or its words
timed."""

from __future__ import annotations

from typing import Literal, TypedDict

from sidecar.shared.messages.payloads import QaCheck, UploadEncoding


class AsrAudio(TypedDict):
    """A `transcribe` or `align` frame's fields but `op`, `batch` and `id` (the scheduler's)."""

    audio: bytes
    encoding: UploadEncoding
    sample_rate: int  # of PCM audio; ignored for "file"
    # what was read: to compare with (transcribe; "" to transcribe only, a clone reference),
    # or whose words (split at white space) are timed (align)
    text: str
    language: str | None


class Transcribe(AsrAudio):
    op: Literal["transcribe"]
    batch: int
    id: str


class Transcript(TypedDict):
    op: Literal["transcript"]
    batch: int
    id: str
    text: str
    qa: dict[str, QaCheck]  # `wer` and `divergent_run` against the text read (none without one)


class Align(AsrAudio):
    op: Literal["align"]
    batch: int
    id: str


class WordTiming(TypedDict):
    word: str
    start: float  # seconds from the start of the audio sent
    end: float


class Aligned(TypedDict):
    op: Literal["aligned"]
    batch: int
    id: str
    words: list[WordTiming]  # every word of the text once, in order, inside the audio
