"""The pieces several messages carry: audio encodings, codec tokens, a voice prompt, quality checks."""

from __future__ import annotations

from typing import Literal, TypedDict

Encoding = Literal["s16le", "f32le"]  # audio: 16-bit PCM or float32, little-endian, mono
# A reference clip to encode may also come as a whole audio file ("file": WAV, FLAC, MP3 or
# OGG bytes as uploaded), so that untrusted files are only ever parsed in a sidecar.
UploadEncoding = Literal["s16le", "f32le", "file"]


class TokenArray(TypedDict):
    shape: list[int]  # [codebooks, frames]
    data: bytes  # int16 little-endian, row-major


class VoicePayload(TypedDict):
    tokens: TokenArray
    ref_text: str
    ref_rms: float | None


# The names a result's `qa` may carry (metric labels come from this set only).
QA_CHECKS = (
    "finite",
    "clipping",
    "rms",
    "leading_silence",
    "trailing_silence",
    "internal_silence",
    "speech_rate",
    "wer",  # the ASR round trip (sidecar/audio/wer.py)
    "divergent_run",
)


class _QaCheckBase(TypedDict):
    passed: bool
    value: float


class QaCheck(_QaCheckBase, total=False):
    """One quality check of an item's audio (sidecar/audio/checks.py)."""

    # Set by the supervisor on the ASR checks of a random-weights Whisper (`make-checkpoint`):
    # reported, never failing a chunk.
    informational: bool
