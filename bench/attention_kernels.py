"""The packed segments' attention kernels on one GPU: FlashAttention-2 varlen (the runtime's
default) against cuDNN's fused attention (`RuntimeOptions.attention="cudnn"`, Hopper, from the
`nvidia-cudnn-frontend` wheel), for speed and for what the packing proof needs.

    python3 bench/attention_kernels.py CHECKPOINT --out attention-kernels.json \\
        [--in-model cudnn fa2]

1. Kernels alone. The packed segments of --items harness mixed texts (conditional and
   unconditional segment per item, as the scheduler packs them) with random q/k/v of the
   backbone's shapes, laid out as a runner graph's inputs (128 segment slots, the empty ones
   past the real segments). For each kernel and each graph cap (1,024 and 4,096): milliseconds a
   layer from CUDA-graph replays of as many calls as the backbone has layers (as a forward pass
   replays them), useful TFLOP/s (`sidecar.runtime.generate.attention_flops` per layer), whether
   the replay equals the eager call, the largest difference from a float32 reference (math SDPA
   per segment; FlashAttention-2's own for scale). Then whether a segment's result depends on
   what it is packed with (bit-equal or not): sampled segments alone, every segment in reversed
   packing order, the same batch at the other cap, and an eager call (unpadded segments, the true
   longest segment as the cap).
2. In the model (--in-model, one load each, graphs captured as served for a few buckets): the
   kernel the runner got (a fallback shows here), the forward pass's time at --items items from
   graph replays, and packing: sampled items alone against in the full batch, and the full batch
   in reversed order, their logits bit-equal or not.

The attention rate inside a real forward pass is `bench/profile_kernels.py --attention KERNEL`'s
`attention_tflops` (the profiler's kernel times in an eager compiled forward). A kernel that
cannot run is reported with its reason.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path
from typing import Any

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import workloads
from packed_segments import capture, random_qkv, segment_lens, summary
from profile_step import timeit

from sidecar.runtime.attention import cudnn_unavailable, per_segment_attention, varlen_attention
from sidecar.runtime.config import ModelConfig
from sidecar.runtime.generate import BatchState
from sidecar.runtime.options import RuntimeOptions
from sidecar.runtime.runner import MAX_SEGMENT_LEN, MAX_SEGMENTS, SHORT_SEGMENT_LEN
from sidecar.shared.options import ATTENTION_KERNELS

CAPS = (SHORT_SEGMENT_LEN, MAX_SEGMENT_LEN)
# In the model: enough buckets for one item alone and --items together, fewer graphs to capture.
BUCKETS = (1024, 2048, 4096, 16384, 40960, 65536)
SAMPLE = 8  # segments (items, in the model) checked alone


def slotted(cu: torch.Tensor, n: int) -> torch.Tensor:
    """cu_seqlens as a runner graph holds them: MAX_SEGMENTS slots, the empty ones at n."""
    out = torch.full((MAX_SEGMENTS + 1,), n, dtype=torch.int32, device=cu.device)
    out[: cu.numel()] = cu
    return out


def replay_ms(fn: Any, calls: int, replays: int = 20) -> tuple[float, torch.Tensor, torch.Tensor]:
    """Milliseconds a call from a CUDA graph of `calls` calls, the replay's last output, and an
    eager call's output (for `graph_equal`)."""
    graph, outs = capture(fn, calls)
    graph.replay()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(replays):
        graph.replay()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / replays / calls, outs[-1], fn()


def kernel_rows(
    kernel: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lens: list[int], layers: int
) -> list[dict[str, Any]]:
    """One kernel's rows: speed at each cap, then the invariance checks."""
    n, scale, dim = q.shape[0], q.shape[2] ** -0.5, q.shape[2]
    bounds = [0, *itertools.accumulate(lens)]
    cu = torch.tensor(bounds, dtype=torch.int32, device=q.device)
    flops = 4 * q.shape[1] * dim * sum(x * x for x in lens)
    with sdpa_kernel(SDPBackend.MATH):
        ref = per_segment_attention(q.float(), k.float(), v.float(), bounds, scale)

    def attend(qq: torch.Tensor, kk: torch.Tensor, vv: torch.Tensor, c: torch.Tensor, cap: int):
        return varlen_attention(qq, kk, vv, c, cap, scale, kernel)

    rows, at_cap, graph_cu = [], {}, slotted(cu, n)
    for cap in CAPS:
        row: dict[str, Any] = {"kernel": kernel, "cap": cap}
        try:
            ms, replayed, eager = replay_ms(lambda cap=cap: attend(q, k, v, graph_cu, cap), layers)
        except Exception as exc:  # a kernel that cannot run here: reported, not fatal
            row["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            rows.append(row)
            print(json.dumps(row), flush=True)
            continue
        at_cap[cap] = eager
        row.update(
            ms_per_layer=round(ms, 4),
            useful_tflops=round(flops / ms / 1e9, 1),
            graph_equal=bool(torch.equal(replayed, eager)),
            max_abs_diff_vs_fp32=float((eager.float() - ref).abs().max()),
            mean_abs_diff_vs_fp32=float((eager.float() - ref).abs().mean()),
        )
        rows.append(row)
        print(json.dumps(row), flush=True)
    if len(at_cap) == len(CAPS):
        rows.append(invariance(kernel, attend, q, k, v, lens, at_cap))
        print(json.dumps(rows[-1]), flush=True)
    return rows


def invariance(  # noqa: PLR0913  a probe: one measurement's attention inputs and the kernel under test
    kernel: str,
    attend: Any,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    lens: list[int],
    at_cap: dict[int, torch.Tensor],
) -> dict[str, Any]:
    """Whether a segment's result at the short cap depends on its company, order, cap or call."""
    n, cap = q.shape[0], CAPS[0]
    bounds = [0, *itertools.accumulate(lens)]
    packed = at_cap[cap]
    order = sorted(range(len(lens)), key=lambda s: lens[s])
    sample = sorted({order[0], order[-1], *order[:: max(1, len(order) // (SAMPLE - 2))]})
    alone_equal = 0
    for s in sample:
        a, b = bounds[s], bounds[s + 1]
        one = torch.tensor([0, b - a], dtype=torch.int32, device=q.device)
        out = attend(q[a:b], k[a:b], v[a:b], slotted(one, b - a), cap)
        alone_equal += int(torch.equal(out, packed[a:b]))
    rev = list(reversed(range(len(lens))))
    index = torch.cat([torch.arange(bounds[s], bounds[s + 1]) for s in rev]).to(q.device)
    rev_cu = torch.tensor([0, *itertools.accumulate(lens[s] for s in rev)], device=q.device)
    out = attend(q[index], k[index], v[index], slotted(rev_cu.int(), n), cap)
    back = torch.empty_like(out)
    back[index] = out
    eager = attend(q, k, v, torch.tensor(bounds, dtype=torch.int32, device=q.device), max(lens))
    return {
        "kernel": kernel,
        "invariance_at_cap": cap,
        "segments_alone_bit_equal": f"{alone_equal}/{len(sample)}",
        "reversed_order_bit_equal": bool(torch.equal(back, packed)),
        "caps_bit_equal": bool(torch.equal(at_cap[CAPS[0]], at_cap[CAPS[1]])),
        "eager_bit_equal": bool(torch.equal(eager, packed)),
    }


def target_rows(state: BatchState, item: int) -> torch.Tensor:
    """One item's cond and uncond rows in the [2S, C, V] logits."""
    off, s = state.packed.target_offsets, state.packed.num_targets
    cols = torch.arange(off[item], off[item + 1])
    return torch.cat([cols, cols + s])


def in_model(checkpoint: str, kernel: str, items: int, device: str) -> dict[str, Any]:
    """The runtime with `kernel`: what it got, its forward pass at `items` items, packing."""
    from sidecar.runtime.omnivoice import OmniVoice
    from sidecar.runtime.request import GenerationRequest

    options = RuntimeOptions(attention=kernel, buckets=BUCKETS)
    model = OmniVoice.load(checkpoint, device=device, dtype="bfloat16", options=options)
    runner = model.runner
    texts = [r.text for r in workloads.mixed(4 * items) if r.words <= 60][:items]
    prompts = []
    for i, text in enumerate(texts):
        it = model.prompter.prepare(GenerationRequest(text=text, seed=i))
        prompts.append(model.prompter.prompt(it, it.text, it.target_len, None, None))
    items = len(prompts)
    row: dict[str, Any] = {"in_model": kernel, "runner_kernel": runner.attention_kernel}
    with torch.inference_mode():
        full = BatchState(model.model, prompts, runner)
        row["tokens"] = full.packed.num_tokens
        row["forward_ms"] = round(timeit(full.logits, torch.cuda.synchronize) * 1e3, 3)
        want = full.forward()
        sample = range(0, items, max(1, items // SAMPLE))
        equal = 0
        for i in sample:
            alone = BatchState(model.model, [prompts[i]], runner).forward()
            equal += int(torch.equal(alone, want[target_rows(full, i)]))
        rev = BatchState(model.model, prompts[::-1], runner)
        rev_logits = rev.forward()
        rev_equal = all(
            torch.equal(rev_logits[target_rows(rev, items - 1 - i)], want[target_rows(full, i)])
            for i in range(items)
        )
    row.update(
        items_alone_bit_equal=f"{equal}/{len(sample)}",
        reversed_order_bit_equal=rev_equal,
        graph_hits=runner.stats.graph_hits,
        graph_misses=runner.stats.graph_misses,
        capture_s=runner.stats.capture_s,
    )
    print(json.dumps(row), flush=True)
    return row


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint")
    ap.add_argument("--items", type=int, default=56)
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--in-model", nargs="*", default=[], choices=ATTENTION_KERNELS)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    device = torch.device(args.device)
    lens, (heads, kv_heads, dim) = segment_lens(args.checkpoint, args.items)
    config = json.loads((Path(args.checkpoint) / "config.json").read_text())
    layers = ModelConfig.from_dict(config).num_layers
    reason = cudnn_unavailable(device, heads, kv_heads, dim, torch.bfloat16)
    q, k, v = random_qkv(sum(lens), (heads, kv_heads, dim), device, torch.bfloat16)
    rows: list[dict[str, Any]] = []
    with torch.inference_mode():
        for kernel in ATTENTION_KERNELS:
            if kernel == "cudnn" and reason is not None:
                rows.append({"kernel": kernel, "error": f"unavailable: {reason}"})
                print(json.dumps(rows[-1]), flush=True)
                continue
            rows.extend(kernel_rows(kernel, q, k, v, lens, layers))
    model_rows = [
        in_model(args.checkpoint, kern, args.items, args.device) for kern in args.in_model
    ]
    cudnn_plans = {}
    if reason is None:  # the engine cuDNN chose for each shape it built
        from sidecar.runtime.kernels import cudnn_attention

        cudnn_plans = cudnn_attention.plans()
    result = {
        **summary(args.items, lens, device),
        "cudnn": torch.backends.cudnn.version(),
        "cudnn_unavailable": reason,
        "cudnn_plans": cudnn_plans,
        "rows": rows,
        "in_model": model_rows,
    }
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
