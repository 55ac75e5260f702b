"""The ASR sidecar's work: audio transcribed (and compared with the text read), or its words
timed."""

from __future__ import annotations

from typing import Literal, TypedDict

from sidecar.shared.messages.payloads import QaCheck, UploadEncoding


class Transcribe(TypedDict):
    op: Literal["transcribe"]
    batch: int
    id: str
    audio: bytes
    encoding: UploadEncoding
    sample_rate: int  # of PCM audio; ignored for "file"
    text: str  # what was read, to compare with; "" to transcribe only (a clone reference)
    language: str | None


class Transcript(TypedDict):
    op: Literal["transcript"]
    batch: int
    id: str
    text: str
    qa: dict[str, QaCheck]  # `wer` and `divergent_run` against the text read (none without one)


class Align(TypedDict):
    op: Literal["align"]
    batch: int
    id: str
    audio: bytes
    encoding: UploadEncoding
    sample_rate: int  # of PCM audio; ignored for "file"
    text: str  # what was read: its words (split at white space) are timed
    language: str | None


class WordTiming(TypedDict):
    word: str
    start: float  # seconds from the start of the audio sent
    end: float


class Aligned(TypedDict):
    op: Literal["aligned"]
    batch: int
    id: str
    words: list[WordTiming]  # every word of the text once, in order, inside the audio
