"""Random numbers as a pure function of (an item's seed, its step, what they are for, a
position or class): a counter-based hash, not a generator's stream, so an item's noise never
depends on what else is in its batch, nor on the step at which it joined one
(`sidecar.runtime.generate`).
"""

from __future__ import annotations

import torch

GUMBEL_EPS = 1e-10
NOISE_POSITION, NOISE_CLASS = 0, 1  # what the numbers are for: one stream of each per item
COUNTER_STRIDE = 1 << 20  # columns per codebook in the noise counter (~11 hours of audio)


def _mix32(x: torch.Tensor) -> torch.Tensor:
    """A 32-bit integer hash (xor-shift-multiply), computed in int64 without overflow."""
    x = ((x >> 16) ^ x) * 0x45D9F3B & 0xFFFFFFFF
    x = ((x >> 16) ^ x) * 0x45D9F3B & 0xFFFFFFFF
    return (x >> 16) ^ x


def uniform_noise(
    seed32: torch.Tensor, step: int | torch.Tensor, kind: int, *counters: torch.Tensor
) -> torch.Tensor:
    """U[0, 1) as float32, a pure function of (seed, step, kind, counters...), broadcasting
    (`step` too: a tensor of steps gives each step's noise, the same bits as one at a time)."""
    h = _mix32((seed32 + (step * 4 + kind) * 0x9E3779B) & 0xFFFFFFFF)
    for c in counters:
        h = _mix32(h ^ c)
    return (h >> 8).to(torch.float32) * (1.0 / (1 << 24))


def gumbel(u: torch.Tensor) -> torch.Tensor:
    return -torch.log(-torch.log(u + GUMBEL_EPS) + GUMBEL_EPS)
