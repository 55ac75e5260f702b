"""A voice prompt encoded from a reference clip (PCM, or a whole file as uploaded)."""

from __future__ import annotations

from typing import Literal, TypedDict

from sidecar.shared.messages.payloads import UploadEncoding, VoicePayload


class _VoiceToEncodeBase(TypedDict):
    audio: bytes
    encoding: UploadEncoding
    sample_rate: int  # of PCM audio; ignored for "file", which says its own
    ref_text: str
    preprocess: bool


class VoiceToEncode(_VoiceToEncodeBase, total=False):
    """An `encode_voice` frame's fields but `op`, `batch` and `id` (the scheduler's)."""

    max_duration_s: float  # refuse a clip longer than this once decoded (invalid_input)


class EncodeVoice(VoiceToEncode):
    op: Literal["encode_voice"]
    batch: int
    id: str


class Encoded(TypedDict):
    op: Literal["encoded"]
    batch: int
    id: str
    voice: VoicePayload
