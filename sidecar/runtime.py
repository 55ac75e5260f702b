"""The OmniVoice runtime as a library: load a checkpoint, generate speech, encode voices.

    model = OmniVoice.load("path/or/hf-id", device="cuda:0", dtype="bfloat16")
    [result] = model.generate([GenerationRequest(text="Hello.")])
    prompt = model.encode_voice(waveform, sample_rate, ref_text="...")
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from sidecar.request import GenerationRequest, GenerationResult, VoicePrompt

# on_progress(stage) is called during loading; on_step(step, num_steps) every denoising step.
ProgressCallback = Callable[[str], None]
StepCallback = Callable[[int, int], None]


class OmniVoice:
    """A loaded OmniVoice model (backbone, text tokenizer, codec) on one device."""

    sample_rate: int = 24000

    @classmethod
    def load(
        cls,
        source: str,
        device: str = "cpu",
        dtype: str = "float32",
        on_progress: ProgressCallback | None = None,
    ) -> "OmniVoice":
        raise NotImplementedError("runtime under construction")

    def generate(
        self,
        requests: Sequence[GenerationRequest],
        on_step: StepCallback | None = None,
    ) -> list[GenerationResult]:
        """Generate every request as one batch; results come back in request order."""
        raise NotImplementedError("runtime under construction")

    def encode_voice(
        self,
        audio: np.ndarray,
        sample_rate: int,
        ref_text: str,
        preprocess: bool = True,
    ) -> VoicePrompt:
        """Turn a reference clip and its transcript into a voice clone prompt."""
        raise NotImplementedError("runtime under construction")
