"""What a caller hands the runtime, and what it gets back.

Plain dataclasses of Python and numpy values, so they cross the process boundary (msgpack)
and the library boundary alike without dragging torch along.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class VoicePrompt:
    """A voice clone prompt: the reference clip as codec tokens, its transcript and loudness.

    `tokens` is int64 [8, Tr]. `ref_text` is the transcript after preprocessing (a closing stop
    added). `ref_rms` is the RMS of the raw reference before any normalisation; generation uses
    it to give the output the reference's loudness.
    """

    tokens: np.ndarray
    ref_text: str
    ref_rms: float | None


@dataclass(frozen=True)
class GenerationRequest:
    """One item of a `generate` call. Defaults are the reference `generate()` defaults."""

    text: str
    language: str | None = None
    instruct: str | None = None
    voice: VoicePrompt | None = None
    duration: float | None = None  # seconds; overrides the estimate (and speed)
    speed: float | None = None
    num_step: int = 32
    guidance_scale: float = 2.0
    t_shift: float = 0.1
    layer_penalty_factor: float = 5.0
    position_temperature: float = 5.0  # 0 = greedy (deterministic)
    class_temperature: float = 0.0  # 0 = argmax
    denoise: bool = True
    postprocess_output: bool = True
    audio_chunk_duration: float = 15.0
    audio_chunk_threshold: float = 30.0
    seed: int | None = None  # seeds this item's random draws; None draws a fresh seed
    return_tokens: bool = False  # also return the generated tokens (continuity prompts)


@dataclass
class GenerationResult:
    """The audio for one request (float32 mono at the codec's sample rate), and its tokens."""

    audio: np.ndarray
    sample_rate: int
    tokens: list[np.ndarray] = field(default_factory=list)  # one int64 [8, T] per chunk
    seed: int | None = None
