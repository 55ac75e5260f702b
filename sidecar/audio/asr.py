"""Speech recognition for the ASR sidecar: a Whisper-family checkpoint through transformers.

Any checkpoint `AutoModelForSpeechSeq2Seq` and `AutoProcessor` load works: a published one
(openai/whisper-large-v3-turbo on a GPU) or the tiny random one `make-checkpoint --kind whisper`
writes for CI. Audio is resampled to the processor's rate and transcribed in windows of at most
30 s (Whisper's context), whose texts are joined.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from sidecar.audio.resample import resample

WINDOW_S = 30


class Transcriber:
    def __init__(self, source: str, device: str, dtype: str) -> None:
        from transformers import AutoModelForSpeechSeq2Seq, AutoProcessor

        self.device = device
        self.dtype = getattr(torch, dtype)
        self.processor: Any = AutoProcessor.from_pretrained(source)
        self.model: Any = AutoModelForSpeechSeq2Seq.from_pretrained(source, dtype=self.dtype)
        self.model.to(device).eval()
        self.sample_rate = int(self.processor.feature_extractor.sampling_rate)
        self.languages = dict(getattr(self.model.generation_config, "lang_to_id", None) or {})

    def transcribe(
        self,
        audio: np.ndarray,
        sample_rate: int,
        language: str | None,
        on_window: Callable[[int, int], None] | None = None,
    ) -> str:
        """The text heard in mono float audio; `language` (an id such as "en") when Whisper
        knows it, else it detects the language itself. `on_window(k, n)` before each window."""
        if sample_rate != self.sample_rate:
            audio = resample(audio, sample_rate, self.sample_rate)
        known = language if language and f"<|{language}|>" in self.languages else None
        size = WINDOW_S * self.sample_rate
        texts = []
        starts = range(0, max(1, len(audio)), size)
        for k, start in enumerate(starts, 1):
            if on_window is not None:
                on_window(k, len(starts))
            window = audio[start : start + size]
            features = self.processor(window, sampling_rate=self.sample_rate, return_tensors="pt")
            inputs = features.input_features.to(self.device, self.dtype)
            with torch.inference_mode():
                ids = self.model.generate(inputs, language=known, task="transcribe")
            texts.append(self.processor.batch_decode(ids, skip_special_tokens=True)[0].strip())
        return " ".join(t for t in texts if t)
