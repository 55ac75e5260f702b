"""Where a forward pass's and a decode's device time goes, by kernel kind: matrix products,
attention, compiled element-wise (Triton), convolutions, other.

    python bench/profile_kernels.py CHECKPOINT --batch 64 --out kernels.json

Runs the forward eagerly (torch.compile on, CUDA graphs off) so that the profiler sees every
kernel; the kernels are the ones a graph replays, so their device times are the same. The
host-side gap (launches) is the eager wall time less the kernel sum; graphs remove most of it.
The decode is profiled whole (codec and post-processing, as the sidecar runs it) and the codec
alone twice, with its activations fused and eager, with the largest difference between the two.
The forward is the runtime's (`BatchState.logits`: bf16 logits, which the scoring kernel reads
as they are); until 2026-12-01 it was `BatchState.forward`, whose float32 upcast added an ATen
copy (0.83 ms at 64 items) that the runtime no longer makes.

`--attention cudnn` runs the forward with cuDNN's attention kernel (`RuntimeOptions.attention`;
the row's `attention_kernel` says which one ran, a fallback included); its `attention_tflops` is
the in-model rate that bench/attention_kernels.py leaves to this script.

`--ops` also attributes the forward's device time to the operators that launched it, with their
input shapes (the profiler's `record_shapes`): which operator makes a copy, and of what; and
each device-to-device copy (`Memcpy DtoD`, 1.9 ms of a forward at 64 items at 4dd9956, from no
operator among the top ones) to the chain of operators (and Python lines, where the profiler
records them) that launched it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from profile_step import TEXT

from sidecar.runtime.codec import load_codec
from sidecar.runtime.generate import BatchState, attention_flops, useful_flops
from sidecar.runtime.omnivoice import Denoised, OmniVoice
from sidecar.runtime.options import RuntimeOptions
from sidecar.runtime.request import GenerationRequest
from sidecar.shared.options import ATTENTION_KERNELS

# First match wins; names are CUDA kernel names as the profiler reports them. Triton comes
# first: Inductor names a kernel after the operations it fuses, and the q/k norm and rotary
# kernel that feeds attention is "triton_per_fused__flash_attention_forward_...". Counted as
# attention (before 2026-12-01), it halved attention's apparent rate: 93 TFLOP/s in
# 2026-11-30-kernels.json, where the FlashAttention kernel itself ran at 198.
KINDS = (
    ("compiled element-wise (Triton)", ("triton",)),
    ("attention", ("flash", "fmha", "attention", "sdpa")),
    ("convolution", ("conv", "fprop", "dgrad", "implicit_gemm", "winograd", "cudnn")),
    ("matrix product", ("gemm", "nvjet", "cutlass", "xmma", "cublas", "matmul")),
)


def kind_of(name: str) -> str:
    low = name.lower()
    for kind, keys in KINDS:
        if any(k in low for k in keys):
            return kind
    return "other"


def kernel_times(fn, repeats: int) -> tuple[dict[str, float], list[tuple[str, float]], float]:
    """Per-call device milliseconds by kind, the top kernels, and the per-call wall time."""
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        start = time.perf_counter()
        for _ in range(repeats):
            fn()
        torch.cuda.synchronize()
        wall = (time.perf_counter() - start) / repeats
    by_kind: dict[str, float] = defaultdict(float)
    by_name: dict[str, float] = defaultdict(float)
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            ms = ev.device_time / 1e3 / repeats  # microseconds -> ms, per call
            by_kind[kind_of(ev.name)] += ms
            by_name[ev.name] += ms
    top = sorted(by_name.items(), key=lambda kv: -kv[1])[:12]
    return dict(by_kind), top, wall * 1e3


def profiled(fn, repeats: int, **options: Any) -> profile:
    """`repeats` calls of fn under the profiler (host and, where there is one, GPU activity),
    after one call outside it; `options` go to `torch.profiler.profile`."""
    on_gpu = torch.cuda.is_available()
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)
    fn()
    sync()
    activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if on_gpu else [])]
    with profile(activities=activities, **options) as prof:
        for _ in range(repeats):
            fn()
        sync()
    return prof


def op_times(fn, repeats: int, top: int = 15) -> list[dict]:
    """The operators whose own kernels took the most device time per call, with their input
    shapes: where a copy or a conversion comes from."""
    prof = profiled(fn, repeats, record_shapes=True)
    rows = []
    for avg in prof.key_averages(group_by_input_shape=True):
        device_us = getattr(avg, "self_device_time_total", 0.0)
        rows.append(
            {
                "op": avg.key,
                "input_shapes": str(avg.input_shapes)[:200],
                "calls": round(avg.count / repeats, 1),
                "self_device_ms": round(device_us / 1e3 / repeats, 3),
            }
        )
    rows.sort(key=lambda r: -r["self_device_ms"])
    return rows[:top]


def copy_sources(fn, repeats: int, top: int = 10) -> list[dict]:
    """Where the forward's memory copies come from: for each copy kernel ("Memcpy ..."), its
    device milliseconds per call, the operators above its launch (innermost first, with input
    shapes) and the Python stack of the nearest one that has one (none for copies launched
    inside compiled code, such as the residual's at 4dd9956)."""
    prof = profiled(fn, repeats, record_shapes=True, with_stack=True)
    found: dict[tuple, dict] = {}
    for ev in prof.events():
        copies = [k for k in getattr(ev, "kernels", []) if k.name.startswith("Memcpy")]
        if not copies:
            continue
        chain, stack, parent = [], [], ev
        while parent is not None:
            chain.append(f"{parent.name} {list(parent.input_shapes or [])}"[:160])
            stack = stack or list(parent.stack or [])
            parent = parent.cpu_parent
        key = (tuple(chain), tuple(stack[:8]))
        row = found.setdefault(
            key, {"device_ms": 0.0, "launches": 0, "ops": chain, "stack": stack[:8]}
        )
        row["device_ms"] += sum(k.duration for k in copies) / 1e3 / repeats
        row["launches"] += len(copies)
    rows = sorted(found.values(), key=lambda r: -r["device_ms"])[:top]
    for row in rows:
        row["device_ms"] = round(row["device_ms"], 3)
        row["launches"] = round(row["launches"] / repeats, 1)
    return rows


def report(
    label: str, by_kind: dict[str, float], top: list[tuple[str, float]], wall_ms: float
) -> dict:
    total = sum(by_kind.values())
    row = {
        "what": label,
        "wall_ms": round(wall_ms, 2),
        "kernel_ms": round(total, 2),
        "by_kind_ms": {k: round(v, 2) for k, v in sorted(by_kind.items(), key=lambda kv: -kv[1])},
        "by_kind_share": {
            k: round(v / total, 3) for k, v in sorted(by_kind.items(), key=lambda kv: -kv[1])
        },
        "top_kernels_ms": [[name[:120], round(ms, 3)] for name, ms in top],
    }
    print(json.dumps(row), flush=True)
    return row


def profile_decode(
    model: OmniVoice, eager_codec: Any, items: list[Any], device: str
) -> list[dict[str, Any]]:
    """The decode of `items` (random tokens) whole, then the codec alone with its activations
    fused and eager, and the largest difference between the two."""
    denoised = [
        Denoised(it, [torch.randint(0, model.mask_id, (model.num_codebooks, it.target_len))])
        for it in items
    ]
    by_kind, top, wall = kernel_times(lambda: model.decode(denoised), repeats=2)
    row = report(f"decode, {len(items)} items", by_kind, top, wall)
    row.update(
        batch=len(items),
        audio_s=round(sum(it.target_len for it in items) / model.frame_rate, 1),
    )
    rows = [row]
    codes = [d.tokens[0].to(device) for d in denoised]
    for label, codec in (("fused", model.codec), ("eager", eager_codec)):
        by_kind, top, wall = kernel_times(lambda codec=codec: codec.decode_many(codes), repeats=2)
        rows.append(
            report(
                f"codec decode_many, {len(items)} items, activations {label}", by_kind, top, wall
            )
        )
    fused, eager = model.codec.decode_many(codes), eager_codec.decode_many(codes)
    rows.append(
        {
            "what": f"fused vs eager activations, {len(items)} items",
            "max_abs_diff": max(float((a - e).abs().max()) for a, e in zip(fused, eager)),
            "max_abs_eager": max(float(e.abs().max()) for e in eager),
        }
    )
    print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--batch", type=int, nargs="+", default=[64])
    ap.add_argument("--skip-forward", action="store_true")
    ap.add_argument("--skip-decode", action="store_true", help="the forward alone")
    ap.add_argument(
        "--ops", action="store_true", help="the forward's device time by operator and shapes"
    )
    ap.add_argument(
        "--residual-copy",
        action="store_true",
        help="each layer's projections added onto a copy of the residual (the runtime's way until "
        "2026-12-02) rather than in place (sidecar/runtime/residual.py): set on the layers before "
        "the stack's first call traces it",
    )
    ap.add_argument(
        "--attention",
        default="fa2",
        choices=ATTENTION_KERNELS,
        help="the packed segments' attention kernel (RuntimeOptions.attention)",
    )
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    model = OmniVoice.load(
        args.checkpoint,
        device=args.device,
        dtype="bfloat16",
        options=RuntimeOptions(cuda_graphs=False, compile=True, attention=args.attention),
    )
    if args.residual_copy:  # without graphs the compiled stack is traced at its first call
        model.runner.residual_in_place = False
        for layer in model.model.llm.layers:
            layer.residual_in_place = False
    eager_codec = (
        None
        if args.skip_decode
        else load_codec(Path(args.checkpoint) / "audio_tokenizer", device=args.device)
    )
    cfg = model.model.cfg
    out = []
    for b in args.batch:
        items = [model.prompter.prepare(GenerationRequest(text=TEXT, seed=i)) for i in range(b)]
        prompts = [model.prompter.prompt(it, it.text, it.target_len, None, None) for it in items]
        with torch.inference_mode():
            if not args.skip_decode:
                out += profile_decode(model, eager_codec, items, args.device)
            if args.skip_forward:
                continue
            state = BatchState(model.model, prompts, model.runner)
            by_kind, top, wall = kernel_times(state.logits, repeats=10)
            row = report(f"forward, {b} items", by_kind, top, wall)
            packed = state.packed
            attn = attention_flops(cfg, packed.segment_lens)
            dense = (
                useful_flops(cfg, packed.segment_lens, packed.num_targets) - attn
            )  # matrix products and head
            row.update(batch=b, tokens=packed.num_tokens, attention_flops=attn, dense_flops=dense)
            row["attention_kernel"] = model.runner.attention_kernel
            if row["by_kind_ms"].get("matrix product"):
                row["matrix_product_tflops"] = round(
                    dense / row["by_kind_ms"]["matrix product"] / 1e9, 1
                )
            if row["by_kind_ms"].get("attention"):
                row["attention_tflops"] = round(attn / row["by_kind_ms"]["attention"] / 1e9, 1)
            out.append(row)
            if args.ops:
                ops = op_times(state.logits, repeats=3, top=40)
                out.append({"what": f"forward, {b} items, by operator", "ops": ops})
                print(json.dumps(out[-1]), flush=True)
                if torch.cuda.is_available():
                    copies = copy_sources(state.logits, repeats=3)
                    out.append({"what": f"forward, {b} items, copies", "copies": copies})
                    print(json.dumps(out[-1]), flush=True)
    if args.out:
        args.out.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
