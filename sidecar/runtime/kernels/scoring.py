"""A denoising step's scoring in one pass on a GPU: a Triton kernel for `BatchState.choose`.

The eager scoring makes about ten float32 passes over the step's logits ([2S, C, V]: the upcast,
three log-softmaxes, the guidance arithmetic, argmax, max), many times what reading the bf16
logits once costs. This kernel reads each (position, codebook) row once, its conditional and
unconditional halves together, and writes the token and its confidence.

Its arithmetic is the eager one, in float32 and in the same order: each log-softmax is
x - max - log(sum(exp(x - max))), the guidance lc + g * (lc - lu), then the log-softmax of that
where g is not 0, the mask token forbidden, the first of equal maxima taken. Two things differ:
the sums inside the softmaxes are added in another order, and `exp` and `log` are Triton's
float32 ones (on a GPU, hardware approximations good to a few units in the last place, where
PyTorch calls CUDA's `expf` and `logf`). So a confidence differs in its last bits, and a token
where two were that close: `bench/profile_step.py` counts the unequal tokens on the GPU
(`choice_tokens_unequal`). On the GPU there were none at 1, 8 and 64 items and the confidences
agreed to float32 rounding, in a fraction of the eager time; so it runs wherever there is a GPU
(`ModelRunner.fused_scoring`; docs/PERFORMANCE.md has the figures).

Without class sampling only (the default); with it the eager path runs (top-k and noise). The
CPU tests run the kernel in Triton's interpreter (TRITON_INTERPRET=1).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

NUM_WARPS = 4


@triton.jit
def _log_softmax(x, inside):
    """log_softmax over the row's lanes; lanes outside the row stay -inf and count for nothing."""
    top = tl.max(x, 0)
    total = tl.sum(tl.where(inside, tl.exp(x - top), 0.0), 0)
    return tl.where(inside, (x - top) - tl.log(total), -float("inf"))


@triton.jit
def _choose_kernel(  # noqa: PLR0913  a Triton kernel: its launch's pointers and sizes; it takes no struct
    logits,  # [2S, C, V]: cond rows, then uncond rows
    guidance,  # [S] float32
    tokens,  # [S, C] int64, out
    confidence,  # [S, C] float32, out
    num_targets,
    num_codebooks,
    vocab,
    row_stride,
    codebook_stride,
    mask_id,
    GUIDED: tl.constexpr,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0)  # one (target position, codebook) pair
    s = row // num_codebooks
    c = row % num_codebooks
    lanes = tl.arange(0, BLOCK)
    inside = lanes < vocab
    at = s * row_stride + c * codebook_stride + lanes
    cond = tl.load(logits + at, mask=inside, other=-float("inf")).to(tl.float32)
    log_probs = _log_softmax(cond, inside)
    if GUIDED:
        uncond = tl.load(logits + num_targets * row_stride + at, mask=inside, other=-float("inf"))
        lu = _log_softmax(uncond.to(tl.float32), inside)
        g = tl.load(guidance + s)
        lc = tl.where(inside, log_probs, 0.0)  # finite outside the row: no inf - inf there
        lu = tl.where(inside, lu, 0.0)
        steered = tl.where(inside, lc + g * (lc - lu), -float("inf"))
        guided = _log_softmax(steered, inside)
        log_probs = tl.where(g != 0, guided, log_probs)
    log_probs = tl.where(lanes == mask_id, -float("inf"), log_probs)
    best = tl.argmax(log_probs, 0, tie_break_left=True)
    tl.store(tokens + row, best.to(tl.int64))
    tl.store(confidence + row, tl.max(log_probs, 0))


def choose(
    logits: torch.Tensor, guidance: torch.Tensor, mask_id: int, guided: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """Token and confidence per target position ([S, C] int64 and float32) from [2S, C, V] logits,
    as `BatchState.choose` scores them without class sampling. `guided`: whether any item's
    guidance is not 0 (if none is, the unconditional half is never read)."""
    rows, num_codebooks, vocab = logits.shape
    num_targets = rows // 2
    if logits.stride(2) != 1:
        logits = logits.contiguous()
    tokens = torch.empty((num_targets, num_codebooks), dtype=torch.long, device=logits.device)
    confidence = torch.empty(
        (num_targets, num_codebooks), dtype=torch.float32, device=logits.device
    )
    if num_targets:
        _choose_kernel[(num_targets * num_codebooks,)](
            logits,
            guidance,
            tokens,
            confidence,
            num_targets,
            num_codebooks,
            vocab,
            logits.stride(0),
            logits.stride(1),
            mask_id,
            GUIDED=guided,
            BLOCK=triton.next_power_of_2(vocab),
            num_warps=NUM_WARPS,
        )
    return tokens, confidence
