"""Generation: a batch of items goes in (`generate`); steps, `denoised`, one `result` per item
and `done` come back."""

from __future__ import annotations

from typing import Literal, TypedDict

from sidecar.shared.messages.payloads import Encoding, QaCheck, TokenArray, VoicePayload
from sidecar.shared.tiers import Tier


class _ItemBase(TypedDict):
    id: str
    text: str


class Item(_ItemBase, total=False):
    """One generation request; every optional key is the GenerationRequest field of that name."""

    language: str | None
    instruct: str | None
    voice: VoicePayload | None
    duration: float | None
    speed: float | None
    num_step: int
    guidance_scale: float
    t_shift: float
    layer_penalty_factor: float
    position_temperature: float
    class_temperature: float
    denoise: bool
    postprocess_output: bool
    audio_chunk_duration: float
    audio_chunk_threshold: float
    seed: int | None
    return_tokens: bool
    attempt: int  # 1 for the first generation of this text, 2 for its first QA retry, ...


class Generate(TypedDict):
    op: Literal["generate"]
    batch: int
    items: list[Item]
    encoding: Encoding
    # The tier the batch runs at. Interactive: it may join the batch the sidecar is denoising,
    # at its next step, and its answers may then come before that batch's; bulk: in turn.
    tier: Tier


class Step(TypedDict):
    op: Literal["step"]
    batch: int
    step: int
    of: int


class Denoised(TypedDict):
    """The device has run the batch's last step; its decoding starts (the finisher sends it)."""

    op: Literal["denoised"]
    batch: int


class _ResultBase(TypedDict):
    op: Literal["result"]
    batch: int
    id: str
    audio: bytes
    encoding: Encoding
    sample_rate: int
    seed: int | None
    tokens: list[TokenArray]  # when the item asked for return_tokens
    timings: dict[str, float]


class Result(_ResultBase, total=False):
    qa: dict[str, QaCheck]  # the quality checks of its audio, by name


class Done(TypedDict):
    op: Literal["done"]
    batch: int
    stats: dict[str, float]
