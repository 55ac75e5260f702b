"""Time the sidecar runtime alone (no HTTP, no supervisor) on one device.

    python bench/runtime_speed.py CHECKPOINT --device cuda:0 --dtype bfloat16 --out result.json

Workloads (default sampling, 32 steps, guidance 2.0, fixed seeds):
  single  one ~3 s sentence (12 words) at a time: latency p50/p95 over --repeats runs
  batch   --batch auto-voice sentences of ~8 s each in one generate() call: x realtime
  clone   the same batch with a 5 s voice prompt: x realtime
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sidecar.runtime.omnivoice import OmniVoice
from sidecar.runtime.options import RuntimeOptions
from sidecar.runtime.request import GenerationRequest

SHORT = "The quick brown fox jumps over the lazy dog near the river bank."
EIGHT_SECONDS = (
    "Every morning the baker rose before the sun, lit the old stone oven, and waited for the "
    "smell of fresh bread to drift through the narrow streets of the sleeping town."
)


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed(model: OmniVoice, requests: list[GenerationRequest], device: str) -> tuple[float, float]:
    sync(device)
    start = time.perf_counter()
    results = model.generate(requests)
    sync(device)
    elapsed = time.perf_counter() - start
    audio_s = sum(r.audio.size for r in results) / model.sample_rate
    return elapsed, audio_s


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--out", type=Path)
    ap.add_argument(
        "--compile",
        choices=("auto", "on", "off"),
        default="auto",
        help="torch.compile the layer stack before graph capture",
    )
    ap.add_argument(
        "--no-graphs", action="store_true", help="eager forward passes (no CUDA graphs)"
    )
    ap.add_argument(
        "--graphs-at-load",
        default="all",
        help="RuntimeOptions.graphs_at_load: a token count, or 'all' (every graph before the "
        "timed runs, as before the option existed; load_s then counts them all)",
    )
    args = ap.parse_args()

    t0 = time.perf_counter()
    model = OmniVoice.load(
        args.checkpoint,
        device=args.device,
        dtype=args.dtype,
        options=RuntimeOptions(
            cuda_graphs=not args.no_graphs,
            compile={"auto": None, "on": True, "off": False}[args.compile],
            graphs_at_load=None if args.graphs_at_load == "all" else int(args.graphs_at_load),
        ),
    )
    load_s = time.perf_counter() - t0
    out: dict[str, object] = {
        "device": args.device,
        "dtype": args.dtype,
        "load_s": round(load_s, 2),
    }
    if args.device.startswith("cuda"):
        out["gpu"] = torch.cuda.get_device_name()

    timed(model, [GenerationRequest(text=SHORT, seed=0)], args.device)  # warm-up
    latencies = [
        timed(model, [GenerationRequest(text=SHORT, seed=i)], args.device)[0]
        for i in range(args.repeats)
    ]
    out["single_p50_s"] = round(statistics.median(latencies), 4)
    out["single_p95_s"] = round(float(np.percentile(latencies, 95)), 4)

    if args.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    batch = [GenerationRequest(text=EIGHT_SECONDS, seed=i) for i in range(args.batch)]
    elapsed, audio_s = timed(model, batch, args.device)
    out["batch"] = args.batch
    out["batch_s"] = round(elapsed, 3)
    out["batch_audio_s"] = round(audio_s, 2)
    out["batch_x_realtime"] = round(audio_s / elapsed, 2)

    rng = np.random.default_rng(0)
    t = np.arange(5 * 24000) / 24000
    ref = (
        0.2 * np.sin(2 * np.pi * 180 * t) * (1 + 0.5 * np.sin(2 * np.pi * 4 * t))
        + 0.01 * rng.standard_normal(t.size)
    ).astype(np.float32)
    voice = model.encode_voice(ref, 24000, "A five second reference clip spoken clearly.")
    clone = [GenerationRequest(text=EIGHT_SECONDS, voice=voice, seed=i) for i in range(args.batch)]
    elapsed, audio_s = timed(model, clone, args.device)
    out["clone_s"] = round(elapsed, 3)
    out["clone_x_realtime"] = round(audio_s / elapsed, 2)
    if args.device.startswith("cuda"):
        out["peak_memory_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)

    if model.runner is not None:
        out["graph_hits"], out["graph_misses"] = (
            model.runner.stats.graph_hits,
            model.runner.stats.graph_misses,
        )
        out["capture_s"] = model.runner.stats.capture_s
        out["padding_waste"] = round(
            1 - model.runner.stats.real_tokens / max(1, model.runner.stats.padded_tokens), 3
        )
    out["compile"], out["graphs"] = args.compile, not args.no_graphs
    out["eager_rounding"] = bool(model.runner.options.compile)  # a compiled stack rounds so
    text = json.dumps(out, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
