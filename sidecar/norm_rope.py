"""Attention's q and k: the per-head RMSNorm and the rotary embedding in one Triton kernel.

In the compiled layer stack, Inductor makes one kernel each for q and k: 7.8 ms of a 75 ms
forward pass at 64 items on an H200, for ~2.6 ms of memory traffic
(`bench/results/2026-12-01-forward-probes.json`); presumably each row is read a second time for
its rotated half (not profiled). This kernel reads each head's row once, as its two halves, and
writes it once.

The arithmetic is `Attention.forward_packed`'s with eager rounding (the layer stack's
`emulate_precision_casts`): the norm in float32, rounded to the model's dtype, times the weight,
rounded; then q * cos and rotate_half(q) * sin, each rounded, and their sum, rounded. Two things
differ from the compiled stack: the squares are summed in another order (two halves of 64), and
`rsqrt` is Triton's. So an element can differ by a unit in the last place of bf16 where the
norm's float32 result lay on a rounding boundary; the logits move by as much as that moves them,
which is for the fidelity run (`bench/fidelity_h200.sh`) to accept before the kernel is used.
It is off unless `OmniVoice.load(fused_norm_rope=True)`. The CPU tests run it in Triton's
interpreter (TRITON_INTERPRET=1).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

ROWS_PER_PROGRAM = 16  # head rows per program: [16, 64] tiles, two per row
NUM_WARPS = 4


@triton.jit
def _rounded(x, dtype: tl.constexpr):
    """Float32 x rounded to `dtype` as PyTorch rounds (to nearest, ties to even), in float32."""
    if dtype == tl.float32:
        return x
    return x.to(dtype, fp_downcast_rounding="rtne").to(tl.float32)


@triton.jit
def _norm_rope_kernel(
    x,  # [rows, 2 * HALF] (one head of one token per row), contiguous
    weight,  # [2 * HALF], the norm's
    cos,  # [tokens, 2 * HALF]
    sin,
    out,  # like x
    rows,
    heads,
    eps,
    HALF: tl.constexpr,
    BLOCK_ROWS: tl.constexpr,
):
    r = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    live = (r < rows)[:, None]
    d = tl.arange(0, HALF)[None, :]
    at = r[:, None] * (2 * HALF) + d
    x1 = tl.load(x + at, mask=live, other=0.0)
    x2 = tl.load(x + at + HALF, mask=live, other=0.0)
    dtype = x1.dtype
    f1, f2 = x1.to(tl.float32), x2.to(tl.float32)
    variance = (tl.sum(f1 * f1, 1) + tl.sum(f2 * f2, 1)) / (2 * HALF)
    scale = tl.math.rsqrt(variance + eps)[:, None]
    w1 = tl.load(weight + d).to(tl.float32)
    w2 = tl.load(weight + d + HALF).to(tl.float32)
    # weight * x.to(dtype): the normalised row rounded, then the product rounded.
    q1 = _rounded(w1 * _rounded(f1 * scale, dtype), dtype)
    q2 = _rounded(w2 * _rounded(f2 * scale, dtype), dtype)
    t = (r // heads)[:, None] * (2 * HALF) + d
    c1 = tl.load(cos + t, mask=live, other=0.0).to(tl.float32)
    c2 = tl.load(cos + t + HALF, mask=live, other=0.0).to(tl.float32)
    s1 = tl.load(sin + t, mask=live, other=0.0).to(tl.float32)
    s2 = tl.load(sin + t + HALF, mask=live, other=0.0).to(tl.float32)
    # q * cos + rotate_half(q) * sin, rotate_half(q) = (-q2, q1): each product rounded, then the sum.
    o1 = _rounded(q1 * c1, dtype) + _rounded(-q2 * s1, dtype)
    o2 = _rounded(q2 * c2, dtype) + _rounded(q1 * s2, dtype)
    tl.store(out + at, _rounded(o1, dtype).to(dtype), mask=live)
    tl.store(out + at + HALF, _rounded(o2, dtype).to(dtype), mask=live)


def launch(
    x: torch.Tensor,
    weight: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    eps: float,
    out: torch.Tensor,
) -> None:
    """Run the kernel: x and out [tokens, heads, head_dim], cos and sin [tokens, head_dim]."""
    tokens, heads, head_dim = x.shape
    rows = tokens * heads
    grid = (triton.cdiv(rows, ROWS_PER_PROGRAM),)
    _norm_rope_kernel[grid](
        x, weight, cos, sin, out, rows, heads, eps,
        HALF=head_dim // 2, BLOCK_ROWS=ROWS_PER_PROGRAM, num_warps=NUM_WARPS,
    )  # fmt: skip


@torch.library.triton_op("omnivoice::norm_rope", mutates_args=())
def norm_rope(
    x: torch.Tensor, weight: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, eps: float
) -> torch.Tensor:
    """RMSNorm of each head's row of x [tokens, heads, head_dim] (contiguous), then the rotary
    embedding with cos and sin [tokens, head_dim]. A custom op, so that the compiled layer
    stack calls the kernel as it is, and CUDA graphs capture it."""
    out = torch.empty_like(x)
    tokens, heads, head_dim = x.shape
    rows = tokens * heads
    grid = (triton.cdiv(rows, ROWS_PER_PROGRAM),)
    torch.library.wrap_triton(_norm_rope_kernel)[grid](
        x, weight, cos, sin, out, rows, heads, eps,
        HALF=head_dim // 2, BLOCK_ROWS=ROWS_PER_PROGRAM, num_warps=NUM_WARPS,
    )  # fmt: skip
    return out
