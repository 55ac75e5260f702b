"""Attention's q and k: the per-head RMSNorm and the rotary embedding in one Triton kernel.

In the compiled layer stack, Inductor makes one kernel each for q and k, which together take
about twice the time their memory traffic needs. This kernel reads each head's row from memory
once and writes it once.

The arithmetic is `Attention.forward_packed`'s with eager rounding (the layer stack's
`emulate_precision_casts`): the norm in float32, rounded to the model's dtype, times the weight,
rounded; then q * cos and rotate_half(q) * sin, each rounded, and their sum, rounded. Two things
make that hold on the GPU:

- The kernel is compiled without floating-point contraction (`enable_fp_fusion=False`), as
  Inductor compiles its own kernels when it emulates eager rounding. With contraction, the
  compiler turns a rounded product and the sum after it into one bf16 FMA that rounds once, and
  a large share of the elements came out a unit in the last place away from eager's. Inductor
  passes no such option to a
  user's Triton kernel inside a compiled graph, so the op below is opaque to the compiler and
  launches the kernel itself.
- The squares are summed as Inductor's kernel sums them: the whole row as one tile, one tl.sum.

On the GPU the layer stack with this kernel gives the logits of the stack without it bit for
bit, so it runs wherever it can (`ModelRunner.fused_norm_rope`; docs/PERFORMANCE.md has the
measurement). Against Inductor's kernel for these lines compiled alone, a handful of elements
still differ by a unit: the order of the row's float32 sum, which depends on how each kernel lays
the row out. The CPU tests run the kernel in Triton's
interpreter (TRITON_INTERPRET=1).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

# Head rows per program and warps: the fastest tile measured at 540, 4,320 and 34,560 tokens,
# with contraction and without.
ROWS_PER_PROGRAM = 8
NUM_WARPS = 4


@triton.jit
def _rounded(x, dtype: tl.constexpr):
    """Float32 x rounded to `dtype` as PyTorch rounds (to nearest, ties to even), in float32."""
    if dtype == tl.float32:
        return x
    return x.to(dtype, fp_downcast_rounding="rtne").to(tl.float32)


@triton.jit
def _norm_rope_kernel(  # noqa: PLR0913  a Triton kernel: its launch's pointers and sizes; it takes no struct
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
    # The squares summed over the whole row as one [rows, 2 * HALF] tile, as in Inductor's kernel.
    whole = tl.load(
        x + r[:, None] * (2 * HALF) + tl.arange(0, 2 * HALF)[None, :], mask=live, other=0.0
    ).to(tl.float32)
    scale = tl.math.rsqrt(tl.sum(whole * whole, 1) / (2 * HALF) + eps)[:, None]
    # The rest goes by halves (the rotary pairs element d with d + HALF); these loads hit the
    # cache lines just read.
    d = tl.arange(0, HALF)[None, :]
    at = r[:, None] * (2 * HALF) + d
    x1 = tl.load(x + at, mask=live, other=0.0)
    x2 = tl.load(x + at + HALF, mask=live, other=0.0)
    dtype = x1.dtype
    f1, f2 = x1.to(tl.float32), x2.to(tl.float32)
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
    """Run the kernel: x and out [tokens, heads, head_dim], cos and sin [tokens, head_dim];
    compiled without contraction, so that it rounds as eager PyTorch does."""
    tokens, heads, head_dim = x.shape
    rows = tokens * heads
    grid = (triton.cdiv(rows, ROWS_PER_PROGRAM),)
    _norm_rope_kernel[grid](
        x,
        weight,
        cos,
        sin,
        out,
        rows,
        heads,
        eps,
        HALF=head_dim // 2,
        BLOCK_ROWS=ROWS_PER_PROGRAM,
        num_warps=NUM_WARPS,
        enable_fp_fusion=False,
    )


@torch.library.custom_op("omnivoice::norm_rope", mutates_args=())
def norm_rope(
    x: torch.Tensor, weight: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, eps: float
) -> torch.Tensor:
    """RMSNorm of each head's row of x [tokens, heads, head_dim] (contiguous), then the rotary
    embedding with cos and sin [tokens, head_dim]. An opaque custom op: the compiled layer
    stack calls it as it is (with the kernel's own compile options), and CUDA graphs capture
    the kernel's launch."""
    out = torch.empty_like(x)
    launch(x, weight, cos, sin, eps, out)
    return out


@norm_rope.register_fake
def _(
    x: torch.Tensor, weight: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, eps: float
) -> torch.Tensor:
    return torch.empty_like(x)
