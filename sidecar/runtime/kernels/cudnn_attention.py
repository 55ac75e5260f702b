"""Attention over packed segments through cuDNN's fused attention (Hopper's flash-attention
kernels), from the `nvidia-cudnn-frontend` package's Python graph API.

The packed q/k/v [tokens, heads, dim] are described to cuDNN as [segments, heads, cap, dim]
with *ragged offsets* (where each segment starts, in elements) and a padding mask (each
segment's length), so cuDNN reads the packed rows in place and writes the packed output: no
gather, no copy. A cuDNN graph is built once per shape (segment slots, cap, heads, dim, dtype)
and kept; building one is slow (tens of milliseconds or more), executing it is one kernel
launch, which a CUDA graph captures. The runtime's graphs have fixed shapes (128 segment slots,
a fixed cap), so each of them meets one built cuDNN graph; the caller rounds an eager call's
shape up (`sidecar/runtime/attention.py`) so that batches of similar sizes share one.

An opaque custom op (`torch.ops.omnivoice.cudnn_attention`): the compiled layer stack calls it
as it is. Import this module only where the package is installed (`sidecar/runtime/attention.py`
decides).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import cudnn  # the nvidia-cudnn-frontend package; a missing one is the caller's ImportError
import torch

from sidecar.runtime.kernels.ragged import ragged_dims, segment_table

_DTYPES = {torch.bfloat16: cudnn.data_type.BFLOAT16, torch.float16: cudnn.data_type.HALF}


def backend_version() -> int:
    """The cuDNN library's version as one number (9.10.2 is 91002)."""
    return int(cudnn.backend_version())


@dataclass(frozen=True)
class Shape:
    slots: int  # segment slots (the runtime's graphs: 128, most of them empty)
    cap: int  # the longest segment the launch covers
    heads: int
    kv_heads: int
    dim: int
    dtype: torch.dtype
    scale: float


class _Built:
    """One cuDNN graph and the handles of its tensors."""

    def __init__(self, shape: Shape, handle: Any, device: torch.device) -> None:
        s = shape
        io = _DTYPES[s.dtype]
        offset_type = cudnn.data_type.INT64 if backend_version() >= 90600 else cudnn.data_type.INT32
        self.offset_dtype = torch.int64 if offset_type == cudnn.data_type.INT64 else torch.int32
        g = cudnn.pygraph(
            io_data_type=io,
            intermediate_data_type=cudnn.data_type.FLOAT,
            compute_data_type=cudnn.data_type.FLOAT,
            handle=handle,
        )

        def packed(name: str, heads: int) -> Any:
            dims, strides = ragged_dims(s.slots, heads, s.cap, s.dim)
            return g.tensor(name=name, dim=dims, stride=strides, data_type=io)

        def column(name: str, rows: int, data_type: Any) -> Any:
            return g.tensor(
                name=name, dim=[rows, 1, 1, 1], stride=[1, 1, 1, 1], data_type=data_type
            )

        self.q, self.k, self.v = (
            packed("q", s.heads),
            packed("k", s.kv_heads),
            packed("v", s.kv_heads),
        )
        self.q_off = column("q_offsets", s.slots + 1, offset_type)
        self.kv_off = column("kv_offsets", s.slots + 1, offset_type)
        self.lens = column("lens", s.slots, cudnn.data_type.INT32)
        self.q.set_ragged_offset(self.q_off)
        self.k.set_ragged_offset(self.kv_off)
        self.v.set_ragged_offset(self.kv_off)
        common = dict(
            name="attention",
            q=self.q,
            k=self.k,
            v=self.v,
            attn_scale=s.scale,
            use_padding_mask=True,
            seq_len_q=self.lens,
            seq_len_kv=self.lens,
        )
        try:
            self.o, _ = g.sdpa(generate_stats=False, **common)
        except TypeError:  # frontends before `generate_stats` name it the other way round
            self.o, _ = g.sdpa(is_inference=True, **common)
        dims, strides = ragged_dims(s.slots, s.heads, s.cap, s.dim)
        self.o.set_output(True).set_dim(dims).set_stride(strides).set_data_type(io)
        self.o_off = column("o_offsets", s.slots + 1, offset_type)
        self.o.set_ragged_offset(self.o_off)
        g.validate()
        g.build_operation_graph()
        g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
        g.check_support()
        g.build_plans()
        self.graph = g
        try:  # which engine cuDNN chose: the benchmark reports it with each shape
            self.plan = str(g.get_plan_name_at_index(0))
        except Exception:  # an older frontend without it
            self.plan = "?"
        # Its own workspace, never freed while the graph lives: a CUDA graph that captured an
        # execution keeps its address.
        self.workspace = torch.empty(
            max(int(g.get_workspace_size()), 1), dtype=torch.uint8, device=device
        )
        # Elements a token takes in q (and the output) and in k/v (`segment_table`).
        self.row_sizes = torch.tensor(
            [[s.heads * s.dim], [s.kv_heads * s.dim]], dtype=self.offset_dtype, device=device
        )


class _Cache:
    """Built graphs by device and shape, and one cuDNN handle per device."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.built: dict[tuple[int, Shape], _Built] = {}
        self.handles: dict[int, Any] = {}

    def get(self, device: torch.device, shape: Shape) -> tuple[_Built, Any]:
        index = device.index if device.index is not None else torch.cuda.current_device()
        with self.lock:
            handle = self.handles.get(index)
            if handle is None:
                with torch.cuda.device(index):
                    handle = self.handles[index] = cudnn.create_handle()
            built = self.built.get((index, shape))
            if built is None:
                with torch.cuda.device(index):
                    built = _Built(shape, handle, torch.device("cuda", index))
                self.built[(index, shape)] = built
            return built, handle


_CACHE = _Cache()


def prepare(  # noqa: PLR0913  the shape the cuDNN graph is built for, one dimension each
    device: torch.device,
    slots: int,
    cap: int,
    heads: int,
    kv_heads: int,
    dim: int,
    dtype: torch.dtype,
    scale: float,
) -> int:
    """Build (or find) the graph of one shape now, outside any CUDA graph capture; returns its
    workspace size in bytes. Raises whatever cuDNN raises for a shape it does not support."""
    built, _ = _CACHE.get(device, Shape(slots, cap, heads, kv_heads, dim, dtype, scale))
    return built.workspace.numel()


def plans() -> dict[str, str]:
    """The engine each built shape runs, by shape (for the benchmark's report)."""
    with _CACHE.lock:
        return {f"{s.slots}x{s.cap}": b.plan for (_, s), b in _CACHE.built.items()}


@torch.library.custom_op("omnivoice::cudnn_attention", mutates_args=())
def cudnn_attention(  # noqa: PLR0913  a torch custom op: its schema takes tensors and scalars, no struct
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens: torch.Tensor,
    slots: int,
    cap: int,
    scale: float,
) -> torch.Tensor:
    """q [N, Hq, D], k/v [N, Hkv, D], cu_seqlens [segments + 1] int32 on the device (segments <=
    slots; the empty slots past them are filled here); returns [N, Hq, D]. Rows outside every
    segment are left as they were allocated (never read). An opaque op, so that the compiled
    layer stack calls it as it is."""
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    heads, dim, kv_heads = q.shape[1], q.shape[2], k.shape[1]
    shape = Shape(slots, cap, heads, kv_heads, dim, q.dtype, scale)
    built, handle = _CACHE.get(q.device, shape)
    lens, q_off, kv_off = segment_table(cu_seqlens, slots, built.row_sizes)
    out = torch.empty_like(q)
    cudnn.set_stream(handle=handle, stream=torch.cuda.current_stream(q.device).cuda_stream)
    built.graph.execute(
        {
            built.q: q,
            built.k: k,
            built.v: v,
            built.o: out,
            built.q_off: q_off,
            built.o_off: q_off,
            built.kv_off: kv_off,
            built.lens: lens,
        },
        built.workspace,
        handle=handle,
    )
    return out


@cudnn_attention.register_fake
def _(q: torch.Tensor, *_args: object) -> torch.Tensor:
    """The op's output for tracing: shaped like q (the dispatcher passes the op's arguments in
    its schema's order, so the rest are not needed)."""
    return torch.empty_like(q)
