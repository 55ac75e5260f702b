"""How packed rows [tokens, heads, dim] are described to cuDNN as a *ragged* tensor
[segment slots, heads, cap, dim]: strides within a segment, and per slot where it starts (its
ragged offset, in elements) and how long it is. Plain torch, so that the CPU tests can check
the description against the rows it must address (sidecar/runtime/kernels/cudnn_attention.py
hands it to cuDNN)."""

from __future__ import annotations

import torch


def ragged_dims(slots: int, heads: int, cap: int, dim: int) -> tuple[list[int], list[int]]:
    """Dims and strides of [slots, heads, cap, dim] over rows laid end to end: a token is one
    row of heads * dim elements (the slot stride is a formality: the ragged offsets say where
    each slot starts)."""
    return [slots, heads, cap, dim], [cap * heads * dim, dim, heads * dim, 1]


def segment_table(
    cu_seqlens: torch.Tensor, slots: int, row_sizes: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(lengths [slots, 1, 1, 1] int32, ragged offsets [slots + 1, 1, 1, 1] for each row size
    in `row_sizes` [2, 1]: elements a token takes in q (and the output), then in k/v).
    cu_seqlens [segments + 1] int32 with segments <= slots; the slots past them are empty,
    starting where the last segment ends. Two small kernels when cu_seqlens already has
    slots + 1 entries (a runner graph's input)."""
    cu = cu_seqlens.to(torch.int32)
    extra = slots + 1 - cu.numel()
    if extra > 0:
        cu = torch.cat([cu, cu[-1:].expand(extra)])
    lens = torch.diff(cu).view(slots, 1, 1, 1)
    offsets = cu.unsqueeze(0) * row_sizes  # [2, slots + 1]
    q_off, kv_off = (row.view(slots + 1, 1, 1, 1) for row in offsets)
    return lens, q_off, kv_off
