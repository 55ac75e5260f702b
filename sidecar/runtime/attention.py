"""Attention over packed segments: every token attends to every token of its own segment only.

On a CUDA device in half precision this is one varlen launch over the packed rows, by one of
two kernels (`RuntimeOptions.attention`):

- `fa2`: FlashAttention-2, the kernel PyTorch ships for SDPA, called with cumulative sequence
  lengths (the default);
- `cudnn`: cuDNN's fused attention on Hopper (`sidecar/runtime/kernels/cudnn_attention.py`),
  through the `nvidia-cudnn-frontend` package where it is installed.

`choose_kernel` settles which one a runner uses, falling back to `fa2` (with a warning) where
the one asked for cannot run. Elsewhere (the CPU, float32) attention runs PyTorch's SDPA once
per segment, with the key/value heads repeated as transformers does, which keeps float32
results equal to the reference's.
"""

from __future__ import annotations

import importlib
import itertools
import logging
from collections.abc import Callable

import torch
import torch.nn.functional as F

from sidecar.shared.options import ATTENTION_KERNELS

log = logging.getLogger(__name__)

CUDNN_MIN_CAPABILITY = (9, 0)  # its ragged (packed) layout runs on Hopper and later
CUDNN_MIN_VERSION = 90100  # cuDNN 9.1: ragged offsets with grouped key/value heads
# cuDNN builds a graph per shape: segment slots and cap rounded up to these multiples, so that
# the eager calls' shapes repeat (the runtime's graphs have 128 slots and caps of 256-multiples).
SLOT_STEP = 32
CAP_STEP = 256


def can_use_flash(q: torch.Tensor) -> bool:
    return q.is_cuda and q.dtype in (torch.float16, torch.bfloat16)


def cudnn_unavailable(
    device: torch.device, heads: int, kv_heads: int, dim: int, dtype: torch.dtype
) -> str | None:
    """Why the cuDNN kernel cannot serve this backbone on `device`, or None where it can: the
    card, the package, the library's version, and a small graph of the backbone's heads built
    as a trial (cuDNN refuses what it does not support when a graph is built)."""
    capability = torch.cuda.get_device_capability(device)
    if capability < CUDNN_MIN_CAPABILITY:
        return f"compute capability {capability} is below {CUDNN_MIN_CAPABILITY}"
    try:
        module = importlib.import_module("sidecar.runtime.kernels.cudnn_attention")
    except ImportError as exc:  # the package is not installed (or its library is missing)
        return f"nvidia-cudnn-frontend cannot be imported ({exc})"
    version = module.backend_version()
    if version < CUDNN_MIN_VERSION:
        return f"cuDNN {version} is older than {CUDNN_MIN_VERSION}"
    try:
        module.prepare(device, SLOT_STEP, CAP_STEP, heads, kv_heads, dim, dtype, dim**-0.5)
    except Exception as exc:  # cuDNN's own refusal, whatever its type
        return f"cuDNN refused the graph ({type(exc).__name__}: {exc})"
    return None


Unavailable = Callable[[torch.device, int, int, int, torch.dtype], "str | None"]


def choose_kernel(
    requested: str,
    device: torch.device,
    dtype: torch.dtype,
    heads: tuple[int, int, int],
    unavailable: Unavailable = cudnn_unavailable,
) -> str:
    """The kernel a runner on `device` in `dtype` uses for a backbone of `heads` (query heads,
    key/value heads, head size) when `requested` is asked for: `fa2` where the requested one
    cannot run, said in a warning. On the CPU or in float32 the choice does not matter
    (attention runs per segment) and `fa2` is returned."""
    if requested not in ATTENTION_KERNELS:
        raise ValueError(f"attention must be one of {', '.join(ATTENTION_KERNELS)}: {requested!r}")
    if requested == "fa2" or device.type != "cuda" or dtype not in (torch.float16, torch.bfloat16):
        return "fa2"
    reason = unavailable(device, *heads, dtype)
    if reason is not None:
        log.warning("attention kernel %r unavailable (%s): using fa2", requested, reason)
        return "fa2"
    return requested


def varlen_attention(  # noqa: PLR0913  the packed attention's tensors and sizes, as every kernel takes them
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens: torch.Tensor,
    max_seqlen: int,
    scale: float,
    kernel: str = "fa2",
) -> torch.Tensor:
    """q [N, Hq, D], k/v [N, Hkv, D] (Hq a multiple of Hkv); returns [N, Hq, D]. `kernel` is
    one that `choose_kernel` returned for this device and dtype."""
    if can_use_flash(q):
        if kernel == "cudnn":
            slots, cap = cudnn_shape(cu_seqlens.shape[0] - 1, max_seqlen)
            return torch.ops.omnivoice.cudnn_attention(q, k, v, cu_seqlens, slots, cap, scale)
        out = torch.ops.aten._flash_attention_forward(
            q, k, v, cu_seqlens, cu_seqlens, max_seqlen, max_seqlen, 0.0, False, False, scale=scale
        )[0]
        return out
    return per_segment_attention(q, k, v, cu_seqlens.tolist(), scale)


def cudnn_shape(num_segments: int, max_seqlen: int) -> tuple[int, int]:
    """The (segment slots, cap) of the cuDNN graph that serves a call: rounded up."""
    return -(-num_segments // SLOT_STEP) * SLOT_STEP, -(-max_seqlen // CAP_STEP) * CAP_STEP


def per_segment_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bounds: list[int], scale: float
) -> torch.Tensor:
    """Each segment (`bounds`: cu_seqlens as a list) attended on its own with torch's SDPA: the
    path off a GPU, and the reference a packed kernel is measured against."""
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
