"""The runtime alone under the sweep's traffic: short requests joining one running batch at a
given rate, in one process, with no server, pipe or supervisor. It says whether the device's
gaps between batch states (bench/span_passes.py's `gap_s`) come from the runtime's own host
work or from the sidecar's other threads.

    PYTHONPATH=/tmp/site:$PWD python3 bench/join_host.py CHECKPOINT [--rate 20] [--seconds 10]
        [--variants plain:0.5,finisher:0.5:2] [--profile] [--out result.json]

Requests (the harness's short texts, `bench/workloads.py`) arrive at random (Poisson) times and
each joins at the next step as an interactive group of its own. A watcher thread waits for each
group's tokens on the device, as the sidecar's does. Each variant (one model, run in turn) is
`plain` or `finisher`, the interpreter's switch interval in milliseconds, and optionally the
most steps the host may queue ahead of the device while interactive members run (the runtime's
`queued_steps`: 0, the default here, no bound; the server steps with
`INTERACTIVE_QUEUED_STEPS`); with `finisher` a thread decodes and post-processes each finished
group and packs its audio into a frame, as the sidecar's finisher does (taking the interpreter's
lock for that Python work). Printed per variant (and saved with `--out`): the device's seconds
in forward passes and in gaps before batch states; the batch states built; the host's
milliseconds per step, with and without a build (its waits under the bound left out); how often
the device had already finished all queued work when the host began a step (the host was
behind); and each request's time from arrival to its tokens on the device (p50, p99). With
`--profile`, two seconds more under torch.profiler: the CUDA runtime calls by total time (a wait
there is a synchronisation), and the host's operators inside each new batch state.

A GPU in bf16 with the production options (compile, CUDA graphs, the Triton kernels); DEV=cpu
runs it on the CPU's tiny checkpoint (float32, eager), to try the script, not to time it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.workloads import short
from sidecar.runtime.omnivoice import OmniVoice
from sidecar.runtime.request import GenerationRequest
from sidecar.runtime.stepper import INTERACTIVE_QUEUED_STEPS, Denoised, Stepper
from sidecar.serve.wire_arrays import audio_to_wire
from sidecar.shared.protocol import encode_frame
from sidecar.shared.tiers import Tier

DEV = os.environ.get("DEV", "cuda:0")
DTYPE = "bfloat16" if DEV.startswith("cuda") else "float32"


def quantile(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Traffic:
    """The run: arrivals, steps, and what each took."""

    def __init__(
        self, model: OmniVoice, args: argparse.Namespace, finisher: bool, depth: int = 0
    ) -> None:
        self.model = model
        self.args = args
        self.with_finisher = finisher
        self.depth = depth
        # As served without the lane; `depth` sets the runtime's own bound on queued steps.
        self.stepper = model.bulk_stepper(4096, depth)
        rng = random.Random(7)
        self.texts = [r.text for r in short(4000)]
        self.arrivals: list[float] = []
        t = 0.0
        while t < args.seconds:
            t += rng.expovariate(args.rate)
            self.arrivals.append(t)
        self.added: dict[Hashable, float] = {}
        self.on_device: dict[Hashable, float] = {}  # tokens ready, by the watcher's clock
        self.step_ms: list[float] = []
        self.build_ms: list[float] = []
        self.behind: list[bool] = []  # per step: the device had finished all queued work
        self.behind_at_build: list[bool] = []
        self.watcher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="watcher")
        self.finisher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="finisher")
        self.frames = 0

    def watch(self, key: Hashable, denoised: list[Denoised]) -> None:
        self.model.wait_denoised(denoised)
        self.on_device[key] = time.monotonic()

    def finish(self, denoised: list[Denoised]) -> None:
        for result in self.model.decode(denoised, {}, Tier.INTERACTIVE):
            frame = {"op": "result", "audio": audio_to_wire(result.audio, "s16le")}
            encode_frame(frame, 1 << 30)  # type: ignore[arg-type]
            self.frames += 1

    def mark(self) -> torch.cuda.Event | None:
        if not DEV.startswith("cuda"):
            return None
        event = torch.cuda.Event()
        event.record()
        return event

    def run(self) -> None:
        start = time.monotonic()
        pending = list(self.arrivals)
        last: torch.cuda.Event | None = None
        n = 0
        while pending or self.stepper.busy:
            now = time.monotonic() - start
            while pending and pending[0] <= now:
                pending.pop(0)
                request = GenerationRequest(text=self.texts[n % len(self.texts)], seed=n)
                self.stepper.add(n, [request], Tier.INTERACTIVE)
                self.added[n] = time.monotonic()
                n += 1
            if not self.stepper.busy:
                time.sleep(max(0.0, pending[0] - now))
                continue
            behind = last is not None and last.query()
            builds = self.stepper.builds
            paced = self.model.runner.stats.paced_s
            began = time.perf_counter()
            finished = self.stepper.step()
            waited = self.model.runner.stats.paced_s - paced  # under the bound: not host work
            took = (time.perf_counter() - began - waited) * 1000
            if self.stepper.builds != builds:
                self.build_ms.append(took)
                self.behind_at_build.append(behind)
            else:
                self.step_ms.append(took)
                self.behind.append(behind)
            last = self.mark()
            for key, denoised in finished:
                self.watcher.submit(self.watch, key, denoised)
                if self.with_finisher:
                    self.finisher.submit(self.finish, denoised)
        self.watcher.shutdown()
        self.finisher.shutdown()

    def report(self) -> dict[str, Any]:
        runner = self.model.runner
        times = runner.settle(wait=True)
        waits = [self.on_device[k] - self.added[k] for k in self.added if k in self.on_device]
        stats = runner.stats
        return {
            "rate": self.args.rate,
            "seconds": self.args.seconds,
            "finisher": self.with_finisher,
            "depth": self.depth,
            "switch_interval_ms": sys.getswitchinterval() * 1000,
            "requests": len(self.added),
            "tokens_on_device_p50_s": round(quantile(waits, 0.5), 4),
            "tokens_on_device_p99_s": round(quantile(waits, 0.99), 4),
            "forward_s": round(times["forward_s"], 3),
            "gap_s": round(times["gap_s"], 3),
            "batch_s": round(times["batch_s"], 3),
            "passes": stats.forward_passes,
            "real_tokens_per_pass": round(stats.real_tokens / max(stats.forward_passes, 1)),
            "builds": self.stepper.builds,
            "host_step_ms_p50": round(quantile(self.step_ms, 0.5), 3),
            "host_step_ms_p99": round(quantile(self.step_ms, 0.99), 3),
            "host_build_step_ms_p50": round(quantile(self.build_ms, 0.5), 3),
            "host_build_step_ms_p99": round(quantile(self.build_ms, 0.99), 3),
            "device_caught_up_share": round(statistics.fmean(self.behind or [0]), 3),
            "device_caught_up_at_build_share": round(
                statistics.fmean(self.behind_at_build or [0]), 3
            ),
            "frames": self.frames,
        }


def profile_steps(model: OmniVoice, args: argparse.Namespace) -> list[str]:
    """Two seconds of the same traffic under torch.profiler (the runtime's bound on queued
    steps, no finisher): the CUDA runtime calls by time, and what the host did inside
    `Stepper._build`, by operator (self time, the calls that began inside a build)."""
    from torch.profiler import ProfilerActivity, profile, record_function

    build = Stepper._build

    def marked(stepper: Stepper, chosen: Any) -> None:
        with record_function("stepper.build"):
            build(stepper, chosen)

    short_run = argparse.Namespace(**{**vars(args), "seconds": 2.0})
    Stepper._build = marked  # type: ignore[method-assign]
    try:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            Traffic(model, short_run, finisher=False, depth=INTERACTIVE_QUEUED_STEPS).run()
    finally:
        Stepper._build = build  # type: ignore[method-assign]
    rows = [e for e in prof.key_averages() if e.key.startswith("cuda")]
    rows.sort(key=lambda e: e.cpu_time_total, reverse=True)
    lines = [
        f"{e.key:40s} calls {e.count:7d} total {e.cpu_time_total / 1000:9.1f} ms" for e in rows[:15]
    ]
    events = prof.events()
    builds = [(e.time_range.start, e.time_range.end) for e in events if e.name == "stepper.build"]
    inside: dict[str, list[float]] = {}
    for event in events:
        start = event.time_range.start
        if event.name != "stepper.build" and any(a <= start < b for a, b in builds):
            inside.setdefault(event.name, []).append(event.self_cpu_time_total)
    total = sum(b - a for a, b in builds)
    lines.append(
        f"builds {len(builds)}, host {total / 1000:.1f} ms in all; inside them, by self time:"
    )
    ranked = sorted(inside.items(), key=lambda kv: sum(kv[1]), reverse=True)
    for name, times in ranked[:25]:
        lines.append(f"  {name:44s} calls {len(times):6d} self {sum(times) / 1000:8.2f} ms")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--rate", type=float, default=20.0, help="requests a second")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument(
        "--variants",
        default="plain:0.5,finisher:0.5,finisher:5",
        help="KIND:SWITCH_MS[:DEPTH],...",
    )
    parser.add_argument(
        "--warm-seconds", type=float, default=2.0, help="traffic before the figures' runs"
    )
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    model = OmniVoice.load(args.checkpoint, DEV, DTYPE)
    warm = argparse.Namespace(**{**vars(args), "seconds": args.warm_seconds})
    Traffic(model, warm, finisher=True).run()  # first uses (codec, buckets) outside the figures
    results = []
    for variant in args.variants.split(","):
        kind, switch_ms, depth = [*variant.split(":"), "0"][:3]
        sys.setswitchinterval(float(switch_ms) / 1000)
        model.runner.settle(wait=True)
        model.runner.stats.forward_passes = model.runner.stats.real_tokens = 0
        traffic = Traffic(model, args, finisher=kind == "finisher", depth=int(depth))
        traffic.run()
        results.append(traffic.report())
        print(json.dumps(results[-1]), flush=True)
    if args.profile and DEV.startswith("cuda"):
        print("\n".join(profile_steps(model, args)), flush=True)
    if args.out is not None:
        args.out.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
