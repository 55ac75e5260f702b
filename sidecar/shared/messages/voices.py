"""A voice prompt encoded from a reference clip (PCM, or a whole file as uploaded)."""

from __future__ import annotations

from typing import Literal, TypedDict

from sidecar.shared.messages.payloads import UploadEncoding, VoicePayload


class _EncodeVoiceBase(TypedDict):
    op: Literal["encode_voice"]
    batch: int
    id: str
    audio: bytes
    encoding: UploadEncoding
    sample_rate: int  # of PCM audio; ignored for "file", which says its own
    ref_text: str
    preprocess: bool


class EncodeVoice(_EncodeVoiceBase, total=False):
    max_duration_s: float  # refuse a clip longer than this once decoded (invalid_input)


class Encoded(TypedDict):
    op: Literal["encoded"]
    batch: int
    id: str
    voice: VoicePayload
