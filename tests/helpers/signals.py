"""Test signals as the sidecar's audio code takes them: float32 samples at 24 kHz unless told."""

from __future__ import annotations

import numpy as np

SR = 24000


def tone(seconds: float, sr: int = SR, amp: float = 0.3, freq: float = 220.0) -> np.ndarray:
    t = np.arange(round(seconds * sr)) / sr
    return (amp * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def silent(seconds: float, sr: int = SR) -> np.ndarray:
    return np.zeros(round(seconds * sr), np.float32)
