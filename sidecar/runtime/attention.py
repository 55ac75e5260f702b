"""Attention over packed segments: every token attends to every token of its own segment only.

On a CUDA device in half precision this is one FlashAttention-2 varlen launch (the kernel
PyTorch ships for SDPA, called with cumulative sequence lengths). Elsewhere (the CPU, float32)
it runs PyTorch's SDPA once per segment, with the key/value heads repeated as transformers does,
which keeps float32 results equal to the reference's.
"""

from __future__ import annotations

import itertools

import torch
import torch.nn.functional as F


def can_use_flash(q: torch.Tensor) -> bool:
    return q.is_cuda and q.dtype in (torch.float16, torch.bfloat16)


def varlen_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens: torch.Tensor,
    max_seqlen: int,
    scale: float,
) -> torch.Tensor:
    """q [N, Hq, D], k/v [N, Hkv, D] (Hq a multiple of Hkv); returns [N, Hq, D]."""
    if can_use_flash(q):
        out = torch.ops.aten._flash_attention_forward(
            q, k, v, cu_seqlens, cu_seqlens, max_seqlen, max_seqlen, 0.0, False, False, scale=scale
        )[0]
        return out
    return _per_segment(q, k, v, cu_seqlens.tolist(), scale)


def _per_segment(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bounds: list[int], scale: float
) -> torch.Tensor:
    groups = q.shape[1] // k.shape[1]
    out = torch.empty_like(q)
    for start, end in itertools.pairwise(bounds):
        if end == start:
            continue
        qs = q[start:end].transpose(0, 1).unsqueeze(0)  # [1, Hq, L, D]
        ks = k[start:end].transpose(0, 1).unsqueeze(0)
        vs = v[start:end].transpose(0, 1).unsqueeze(0)
        if groups > 1:
            ks = ks.repeat_interleave(groups, dim=1)
            vs = vs.repeat_interleave(groups, dim=1)
        out[start:end] = F.scaled_dot_product_attention(qs, ks, vs, scale=scale)[0].transpose(0, 1)
    return out
