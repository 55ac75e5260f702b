"""The open question: is there an attention kernel faster than FlashAttention-2 varlen over the
packed segments, and what does it do to the rounding? Attention over one forward pass's packed
segments, several ways, timed alone on the GPU.

    python3 bench/probe_faster_attention.py CHECKPOINT --items 56 --out attention.json

The segments are the ones the scheduler packs from the harness's mixed texts (conditional and
unconditional segment per item, prompts built by the runtime itself), with random q/k/v of the
backbone's shapes. Ways:
  varlen             the runtime's FlashAttention-2 varlen call, max_seqlen at the graph cap
                     (4096) and at the true longest segment;
  cudnn ragged       (with `--cudnn-ragged`) cuDNN's attention over the same packed layout
                     (`aten._cudnn_attention_forward` with the cumulative lengths: cuDNN's ragged,
                     THD layout), max_seqlen at the graph cap and at the true longest segment,
                     with 8 key/value heads as they are and with them repeated to 16; each also
                     captured in a CUDA graph and replayed (`graph_equal`: the replay equals the
                     eager call bit for bit), since the runtime's forward runs from graphs. On an
                     H200 with torch 2.11, ~70 ms a layer and no graph
                     (bench/results/2026-12-01-attention-cudnn-ragged.json);
  grouped G, B       segments sorted by length and cut into G groups; each group gathered into a
                     dense [g, L, H, D] batch padded to its own longest segment, SDPA with a key
                     padding mask on backend B (cuDNN, efficient, flash), scattered back. The
                     gathers and scatters are timed with it.
Each way reports milliseconds per layer, useful TFLOP/s (attention FLOPs of the real segments,
as `sidecar.runtime.generate.attention_flops`) and its largest difference from varlen on real tokens.
A way the installed PyTorch refuses is reported with its error. The result also lists the
flash-attention implementations PyTorch has registered (`torch.nn.attention`). With
`--flash-impl FA4` (the `flash-attn-4` package importable: `bash bench/device/fa4.sh`), the
varlen ways run again after `torch.nn.attention.activate_flash_attention_impl("FA4")`, which
routes the runtime's own call (`aten._flash_attention_forward`) to FlashAttention 4's Hopper
kernel: their time, their largest difference from FlashAttention-2's output, and whether a CUDA
graph takes them. `--device cpu` checks the grouping's arithmetic against the per-segment path
on the CPU (math backend), no timings.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import sys
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from packed_segments import capture, random_qkv, segment_lens, summary
from profile_step import timeit

from sidecar.runtime.attention import varlen_attention
from sidecar.runtime.runner import MAX_SEGMENT_LEN

BACKENDS = {
    "cudnn": SDPBackend.CUDNN_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "flash": SDPBackend.FLASH_ATTENTION,
    "math": SDPBackend.MATH,
}


class Grouped:
    """Segments sorted by length, cut into `groups` runs of similar length, each a dense batch."""

    def __init__(self, lens: list[int], groups: int, device: torch.device) -> None:
        starts = [0, *itertools.accumulate(lens)]
        order = sorted(range(len(lens)), key=lambda s: lens[s])
        size = -(-len(order) // groups)
        self.batches = []  # (gather index [g, L], key mask [g, 1, 1, L], valid [g, L])
        for first in range(0, len(order), size):
            members = order[first : first + size]
            width = max(lens[s] for s in members)
            pos = torch.arange(width)
            index = torch.stack([starts[s] + pos.clamp(max=lens[s] - 1) for s in members])
            valid = torch.stack([pos < lens[s] for s in members])
            self.batches.append(
                (index.to(device), valid[:, None, None, :].to(device), valid.to(device))
            )

    def __call__(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float
    ) -> torch.Tensor:
        out = torch.empty_like(q)
        groups = q.shape[1] // k.shape[1]
        for index, mask, valid in self.batches:
            qs = q[index].transpose(1, 2)  # [g, H, L, D]
            ks = k[index].transpose(1, 2).repeat_interleave(groups, dim=1)
            vs = v[index].transpose(1, 2).repeat_interleave(groups, dim=1)
            o = F.scaled_dot_product_attention(qs, ks, vs, attn_mask=mask, scale=scale)
            out[index[valid]] = o.transpose(1, 2)[valid]
        return out


def cudnn_ragged(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu: torch.Tensor, cap: int, scale: float
) -> torch.Tensor:
    """cuDNN's attention over packed segments (the path PyTorch takes for jagged nested tensors)."""
    return torch.ops.aten._cudnn_attention_forward(
        q, k, v, None, cu, cu, cap, cap, False, scale=scale
    )[0]


def graph_equal(fn: Any) -> bool:
    """Whether `fn` can be captured in a CUDA graph and its replay equals the eager call."""
    want = fn()
    graph, (out,) = capture(fn)
    graph.replay()
    torch.cuda.synchronize()
    return bool(torch.equal(out, want))


def measure(  # noqa: PLR0913  a probe: one measurement's attention inputs as the kernel takes them
    label: str,
    fn: Any,
    want: torch.Tensor,
    flops: int,
    on_gpu: bool,
    backend: SDPBackend | None = None,
    graph: bool = False,
) -> dict[str, Any]:
    """One way's row: its largest difference from `want`; on a GPU its time, its useful rate and,
    with `graph`, whether a CUDA graph takes it. A way that fails is reported with its error."""
    row: dict[str, Any] = {"way": label}
    try:
        with sdpa_kernel(backend) if backend is not None else contextlib.nullcontext():
            got = fn()
            row["max_abs_diff"] = float((got.float() - want.float()).abs().max())
            if on_gpu:
                ms = timeit(fn, torch.cuda.synchronize) * 1e3
                row["ms_per_layer"] = round(ms, 3)
                row["useful_tflops"] = round(flops / ms / 1e9, 1)
                if graph:
                    row["graph_equal"] = graph_equal(fn)
    except Exception as exc:  # a refused or unsupported way: reported, not fatal
        row["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
    print(json.dumps(row), flush=True)
    return row


def other_impl(  # noqa: PLR0913  a probe: one measurement's attention inputs as the kernel takes them
    name: str,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu: torch.Tensor,
    lens: list[int],
    scale: float,
    flops: int,
    want: torch.Tensor,
) -> list[dict[str, Any]]:
    """The runtime's varlen call again, once PyTorch routes it to implementation `name`; for
    FA4 also its own varlen function, called directly (PyTorch's shim may expect another
    flash-attn-4 release than the one installed)."""

    def at_both_caps(label: str, attend: Any) -> list[dict[str, Any]]:
        return [
            measure(
                f"{label}, max_seqlen {cap}",
                lambda cap=cap: attend(q, k, v, cu, cap, scale),
                want,
                flops,
                on_gpu=True,
                graph=True,
            )
            for cap in (MAX_SEGMENT_LEN, max(lens))
        ]

    rows = at_both_caps("varlen FA4 direct", fa4_varlen) if name == "FA4" else []
    try:
        torch.nn.attention.activate_flash_attention_impl(name)
    except Exception as exc:  # a missing package, an unsupported card: reported, not fatal
        row = {"way": f"varlen {name}", "error": f"{type(exc).__name__}: {exc}"[:300]}
        print(json.dumps(row), flush=True)
        return [*rows, row]
    return rows + at_both_caps(f"varlen {name}", varlen_attention)


def fa4_varlen(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu: torch.Tensor, cap: int, scale: float
) -> torch.Tensor:
    """`flash_attn.cute.flash_attn_varlen_func` (flash-attn-4) over the packed segments."""
    from flash_attn.cute import flash_attn_varlen_func  # only where the package is installed

    out = flash_attn_varlen_func(
        q,
        k,
        v,
        cu_seqlens_q=cu,
        cu_seqlens_k=cu,
        max_seqlen_q=cap,
        max_seqlen_k=cap,
        softmax_scale=scale,
    )
    return out[0] if isinstance(out, tuple) else out


def flash_impls() -> dict[str, Any]:
    """The flash-attention implementations PyTorch lists, and the active one (if it can say)."""
    attention = torch.nn.attention
    found: dict[str, Any] = {}
    for name in ("list_flash_attention_impls", "current_flash_attention_impl"):
        fn = getattr(attention, name, None)
        if fn is not None:
            with contextlib.suppress(Exception):
                found[name] = fn()
    return found


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint")
    ap.add_argument("--items", type=int, default=56)
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--flash-impl", help="run the varlen ways again with this implementation (FA4)")
    ap.add_argument("--cudnn-ragged", action="store_true", help="also cuDNN's ragged layout")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    device = torch.device(args.device)
    on_gpu = device.type == "cuda"
    lens, (heads, kv_heads, dim) = segment_lens(args.checkpoint, args.items)
    dtype = torch.bfloat16 if on_gpu else torch.float32
    q, k, v = random_qkv(sum(lens), (heads, kv_heads, dim), device, dtype)
    cu = torch.tensor([0, *itertools.accumulate(lens)], dtype=torch.int32, device=device)
    scale = dim**-0.5
    flops = 4 * heads * dim * sum(x * x for x in lens)
    rows: list[dict[str, Any]] = []
    with torch.inference_mode():
        want = varlen_attention(q, k, v, cu, max(lens), scale)
        ways: list[tuple[str, Any, SDPBackend | None, bool]] = []  # label, fn, backend, graph
        if on_gpu:
            for cap in (MAX_SEGMENT_LEN, max(lens)):
                ways.append(
                    (
                        f"varlen, max_seqlen {cap}",
                        lambda cap=cap: varlen_attention(q, k, v, cu, cap, scale),
                        None,
                        False,
                    )
                )
            groups_of_kv = heads // kv_heads
            k16, v16 = (t.repeat_interleave(groups_of_kv, dim=1) for t in (k, v))
            for cap in (MAX_SEGMENT_LEN, max(lens)) if args.cudnn_ragged else ():
                for label, kk, vv in (("", k, v), (", k/v repeated", k16, v16)):
                    ways.append(
                        (
                            f"cudnn ragged, max_seqlen {cap}{label}",
                            lambda cap=cap, kk=kk, vv=vv: cudnn_ragged(q, kk, vv, cu, cap, scale),
                            None,
                            True,
                        )
                    )
        for groups in (1, 2, 4, 8, 16):
            grouped = Grouped(lens, groups, device)
            for name in ("cudnn", "efficient", "flash") if on_gpu else ("math",):
                ways.append(
                    (
                        f"grouped {groups}, {name}",
                        lambda g=grouped: g(q, k, v, scale),
                        BACKENDS[name],
                        False,
                    )
                )
        for label, fn, backend, graph in ways:
            rows.append(measure(label, fn, want, flops, on_gpu, backend, graph))
        if on_gpu and args.flash_impl:
            rows.extend(other_impl(args.flash_impl, q, k, v, cu, lens, scale, flops, want))
    result = {
        **summary(args.items, lens, device),
        "flash_impls": flash_impls(),
        "rows": rows,
    }
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
