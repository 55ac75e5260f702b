"""Small interactive passes on a CUDA stream of their own beside the bulk batch's, in the runtime.

The bulk batch is the mixed run's pass (its requests in order, long ones as all their chunks, up
to `--bulk-tokens`, ~44,700 by default: `decode_cost.py`'s batch), on the runtime as the sidecar
loads it (bf16, the stack compiled by regions, CUDA graphs), on the default stream. The small
passes are the harness's short requests packed up to each of `--small-tokens`, on a runner of
their own (own buckets, static inputs, graphs and memory pool, sharing the weights) and a stream
of their own, at the bulk's priority (`equal`: graphs captured and replayed at 0) or the
device's highest (`high`: `RuntimeOptions.graph_priority`). A small pass is replayed step after
step, the host waiting for each as a denoising loop does; its time is the host's, from its
launch to its end. The bulk's rate is its real tokens (and useful FLOPs) over the device time
from its first pass's start to its last pass's end, so a gap the host leaves counts against it.

Each alone, then together, per `--kinds`:
- `forward`: the compiled forward pass (`BatchState.logits`: staging, the graph, the audio head);
- `step`: a `Stepper` step (forward, scoring, reveal, and the stepper's host work; a finished
  group is added again), as the sidecar denoises;

and per `--hosts`, who launches the two loops:
- `queued`: every bulk pass of the window queued first, then the small loop alone on the host
  (the device's share only, as `/work/shared/tools/probe_two_streams.py` measured it);
- `interleaved`: one host thread, which keeps `--bulk-depth` bulk passes queued and runs a small
  pass (waiting for it) between;
- `threads`: a Python thread queues the bulk passes (at most `--bulk-depth` ahead, waiting on an
  event, which releases the GIL), the main thread runs the small loop (the retired lane's shape);
- `lanes` (kind `step` only): the design, `sidecar.runtime.interleave` driving a bulk and an
  interactive `Stepper` as a sidecar does with `--interactive-stream` (`two_streams_lanes.py`):
  short groups one after another, each timed from its add to its last step's end on the device
  (`request_p50_ms`, `request_p99_ms`; per step: `small_p50_ms`), beside the bulk's mixed
  requests of one round of steps, against the same loop without them.

Then, with `--partitions K,...` (`two_streams_partitions.py`: CUDA green contexts), kind
`forward`, host `queued`: per K, the small passes on a green context of K SMs (their graphs
captured on its stream) and the bulk on a green context of the rest (a runner of its own, its
graph captured there) or on the whole device as above: the bulk alone on the rest (its rate
against the whole device's: what the partition costs while the small lane idles), each small
pass alone on its K SMs, and each beside the bulk on the rest and on the whole device.

    python3 bench/two_streams.py /tmp/full --out two-streams.json
    python3 bench/two_streams.py /tmp/tiny --device cpu --dry-run --out dry.json  # the code path

One JSON object (stdout's last line, and `--out`, rewritten after every row so a run cut short
keeps what it measured): `bulk` and `small` (what a pass holds), `alone` (per kind: the bulk's
rate, each small pass's times at each priority) and `beside`, a row per kind, host, priority and
small size: `small_p50_ms`, `small_p99_ms`, `small_mean_ms`, `small_passes`,
`small_p50_over_alone`, `bulk_ms_per_pass`, `bulk_tokens_per_s`, `bulk_tflops`, `bulk_share` (the
bulk's rate beside over alone, same kind), `total_tflops` (both lanes' useful FLOPs over the
bulk's window). And `partitions`, with `--partitions`: `supported` (false with `reason` where
green contexts cannot run; the other arms' rows stand), `way` (`driver`: cuda-python's one
disjoint split; `torch`: `GreenContext.create`), `device_sms`, `granule`, `splits` (per
K: `small_sms`, `bulk_sms` as made, `way`, `disjoint`, `error` where it failed), `alone` (per K:
the bulk on the rest, `bulk_partition_share`, each small pass) and `rows` (the keys above with
`bulk_on`: `rest` or `whole`, `interactive_sms`, `small_sms`, `bulk_sms`, `small_graphs`,
`bulk_graphs`; `bulk_share` against the whole device alone). On the CPU (`--dry-run`) there are
no streams and the timings mean nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import math
import statistics
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import two_streams_lanes, two_streams_partitions, workloads
from bench.decode_cost import MIXED_TOKENS, chunk_prompts, request, voice_prompt
from sidecar.runtime import streams
from sidecar.runtime.generate import BatchState, useful_flops
from sidecar.runtime.omnivoice import OmniVoice
from sidecar.runtime.options import RuntimeOptions
from sidecar.runtime.request import GenerationRequest
from sidecar.runtime.runner import ModelRunner
from sidecar.runtime.stepper import Stepper
from sidecar.shared.options import STEP_TOKENS

KINDS = ("forward", "step")
HOSTS = ("queued", "interleaved", "threads", "lanes")
PRIORITIES = {"equal": 0, "high": streams.HIGHEST}
SMALL_TOKENS = (500, 1000, 1500, 3000)
ALONE_SMALL_PASSES = 40

Mark = torch.cuda.Event | float


# ---------------------------------------------------------------- the summary's arithmetic


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank percentile (`q` in 0..100) of a non-empty sample."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def small_summary(seconds: Sequence[float]) -> dict[str, float | int]:
    """A small lane's pass times (host seconds, launch to end) in milliseconds."""
    return {
        "small_p50_ms": round(percentile(seconds, 50) * 1e3, 3),
        "small_p99_ms": round(percentile(seconds, 99) * 1e3, 3),
        "small_mean_ms": round(statistics.fmean(seconds) * 1e3, 3),
        "small_passes": len(seconds),
    }


@dataclass(frozen=True)
class Rate:
    """Work done on one lane over a window of device time."""

    passes: int
    tokens: int
    flops: float
    seconds: float

    def summary(self) -> dict[str, float | int]:
        return {
            "bulk_passes": self.passes,
            "bulk_ms_per_pass": round(self.seconds / self.passes * 1e3, 3),
            "bulk_tokens_per_s": round(self.tokens / self.seconds),
            "bulk_tflops": round(self.flops / self.seconds / 1e12, 2),
        }


def beside_row(
    bulk: Rate,
    bulk_alone: Rate,
    small: Sequence[float],
    small_alone_p50_s: float,
    small_flops: float,
) -> dict[str, float | int]:
    """One measurement beside: the small lane's times and the bulk's rate, each against alone."""
    return {
        **small_summary(small),
        "small_p50_over_alone": round(percentile(small, 50) / small_alone_p50_s, 3),
        **bulk.summary(),
        "bulk_share": round(
            (bulk.tokens / bulk.seconds) / (bulk_alone.tokens / bulk_alone.seconds), 4
        ),
        "total_tflops": round((bulk.flops + small_flops) / bulk.seconds / 1e12, 2),
    }


# ---------------------------------------------------------------- lanes


def on_stream(stream: torch.cuda.Stream | None) -> contextlib.AbstractContextManager[object]:
    return torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext()


def mark(device: torch.device) -> Mark:
    """A point in the current stream's timeline (the host's clock off a GPU)."""
    if device.type != "cuda":
        return time.perf_counter()
    event = torch.cuda.Event(enable_timing=True)
    event.record()
    return event


def reached(m: Mark) -> bool:
    return isinstance(m, float) or m.query()


def elapsed(start: Mark, end: Mark) -> float:
    if isinstance(start, float) and isinstance(end, float):
        return end - start
    assert not isinstance(start, float) and not isinstance(end, float)
    end.synchronize()
    return start.elapsed_time(end) / 1e3


@dataclass
class Lane:
    """One loop's work: a runner of its own (graphs, static inputs, memory pool), a stream of its
    own (None: the CPU), and `one`, which queues a pass or a step there."""

    runner: ModelRunner
    stream: torch.cuda.Stream | None
    one: Callable[[], None]
    # What its work runs under: arm `--partitions`' lanes make their green context current.
    current: Callable[[], contextlib.AbstractContextManager[object]] = contextlib.nullcontext

    def counters(self) -> tuple[int, float]:
        return self.runner.stats.real_tokens, self.runner.stats.useful_flops

    def timed(self) -> float:
        """One pass, the host waiting for its end: the host's seconds from its launch."""
        began = time.perf_counter()
        with self.current(), torch.inference_mode(), on_stream(self.stream):
            self.one()
        if self.stream is not None:
            self.stream.synchronize()
        return time.perf_counter() - began


class Bulk:
    """The bulk lane's passes of one window, each between two marks on its stream."""

    def __init__(self, lane: Lane, passes: int, depth: int) -> None:
        self.lane, self.passes, self.depth = lane, passes, depth
        self.marks: list[tuple[Mark, Mark]] = []
        self.before = lane.counters()

    @property
    def queued_all(self) -> bool:
        return len(self.marks) >= self.passes

    def push(self) -> None:
        device = self.lane.runner.device
        with self.lane.current(), torch.inference_mode(), on_stream(self.lane.stream):
            start = mark(device)
            self.lane.one()
            self.marks.append((start, mark(device)))

    def pending(self) -> int:
        return sum(not reached(end) for _, end in self.marks[-self.depth - 1 :])

    def top_up(self) -> None:
        """Queue passes until `depth` are waiting on the device (or all of the window's are)."""
        while not self.queued_all and self.pending() < self.depth:
            self.push()

    def feed(self) -> None:
        """Queue every pass, at most `depth` ahead, waiting for the device in between."""
        for i in range(self.passes):
            if i >= self.depth:
                end = self.marks[i - self.depth][1]
                if not isinstance(end, float):
                    end.synchronize()  # releases the GIL
            self.push()

    @property
    def done(self) -> bool:
        return self.queued_all and reached(self.marks[-1][1])

    def rate(self) -> Rate:
        seconds = elapsed(self.marks[0][0], self.marks[-1][1])
        tokens, flops = self.lane.counters()
        return Rate(len(self.marks), tokens - self.before[0], flops - self.before[1], seconds)


def forward_pass(runner: ModelRunner, state: BatchState) -> Callable[[], None]:
    """`one` for the bulk's kind `forward`: the compiled forward pass, its useful FLOPs counted."""
    flops = useful_flops(runner.model.cfg, state.packed.segment_lens, state.packed.num_targets)

    def one() -> None:
        state.logits()
        runner.stats.useful_flops += flops

    return one


def denoising_step(runner: ModelRunner, state: BatchState) -> Callable[[], None]:
    """`one` for the bulk's kind `step`: the batch's denoising steps (forward, scoring, reveal)
    as the stepper runs them while its members stay, over and over: the same shapes every
    window (a stepper's second round of long items would move the bulk's size between windows,
    and the rate with it)."""
    flops = useful_flops(runner.model.cfg, state.packed.segment_lens, state.packed.num_targets)
    iterations = itertools.count()

    def one() -> None:
        step = next(iterations) % state.num_steps
        if max(state.k[step]) > 0:
            state.reveal(*state.choose(state.logits(), step), step)
            runner.stats.useful_flops += flops

    return one


def stepper_step(stepper: Stepper, requests: list[GenerationRequest]) -> Callable[[], None]:
    """`one` for the small lane's kind `step`: a `Stepper` step, the requests added again once
    done (a new request's preparation and device state then count in its first step)."""
    keys = itertools.count()

    def one() -> None:
        if not stepper.busy:
            stepper.add(next(keys), requests)
        stepper.step()

    return one


# ---------------------------------------------------------------- the windows


def measure_beside(host: str, bulk: Bulk, small: Lane) -> list[float]:
    """The small lane's pass times while `bulk`'s window runs, launched as `host` says."""
    times: list[float] = []
    if host == "queued":
        bulk.depth = bulk.passes
        bulk.top_up()
    if host == "threads":
        failed: list[BaseException] = []

        def feed() -> None:
            try:
                bulk.feed()
            except BaseException as exc:  # re-raised on the main thread
                failed.append(exc)

        thread = threading.Thread(target=feed, name="bulk", daemon=True)
        thread.start()
        while not times or thread.is_alive() or not bulk.done:
            times.append(small.timed())
            if failed:
                raise failed[0]
        thread.join()
        return times
    while not times or not bulk.done:
        if host == "interleaved":
            bulk.top_up()
        times.append(small.timed())
    return times


@dataclass
class Setup:
    model: OmniVoice
    bulk: dict[str, Lane]  # by kind
    small: dict[tuple[str, str, int], Lane]  # by kind, priority, tokens
    batches: dict[str, Any]
    bulk_prompts: list[Any]  # arm `--partitions`: the bulk batch again, on a runner of its own
    lanes_bulk: list[GenerationRequest]  # host `lanes`: the bulk's requests, one round each
    lanes_small: dict[tuple[str, int], two_streams_lanes.Small]  # by priority, tokens
    green: list[two_streams_partitions.Pair] = field(default_factory=list)  # `--partitions`


def bulk_alone(lane: Lane, passes: int, depth: int) -> Rate:
    bulk = Bulk(lane, passes, depth)
    while not bulk.queued_all:
        bulk.top_up()
    return bulk.rate()


def alone(setup: Setup, args: argparse.Namespace, kind: str) -> tuple[Rate, dict[str, Any]]:
    """The bulk lane alone over a window of `--seconds` (after a warm-up), and each small lane
    alone: the bulk's rate, and what the result file keeps."""
    lane = setup.bulk[kind]
    bulk_alone(lane, 2, args.bulk_depth)  # warm: a stepper's first steps build and compile
    rate = bulk_alone(lane, 3, args.bulk_depth)
    passes = max(2, round(args.seconds / (rate.seconds / rate.passes)))
    rate = bulk_alone(lane, passes, args.bulk_depth)
    small: dict[str, Any] = {}
    for (k, priority, tokens), small_lane in setup.small.items():
        if k == kind:
            times = [small_lane.timed() for _ in range(args.small_passes)]
            small[f"{priority}/{tokens}"] = small_summary(times)
    return rate, {"bulk": rate.summary(), "small": small}


def run(setup: Setup, args: argparse.Namespace, out: dict[str, Any]) -> None:
    """Every row, the JSON rewritten after each."""
    rows: list[dict[str, Any]] = []
    out["alone"], out["beside"] = {}, rows
    rates: dict[str, Rate] = {}
    for kind in args.kinds:
        rates[kind], kept = alone(setup, args, kind)
        alone_rate = rates[kind]
        out["alone"][kind] = kept
        for host, ((k, priority, tokens), lane) in itertools.product(
            args.hosts, setup.small.items()
        ):
            if k != kind or host == "lanes":
                continue
            bulk = Bulk(setup.bulk[kind], alone_rate.passes, args.bulk_depth)
            small_flops = lane.runner.stats.useful_flops
            times = measure_beside(host, bulk, lane)
            small_flops = lane.runner.stats.useful_flops - small_flops
            p50 = kept["small"][f"{priority}/{tokens}"]["small_p50_ms"] / 1e3
            row = {"kind": kind, "host": host, "priority": priority, "small_tokens": tokens}
            row |= beside_row(bulk.rate(), alone_rate, times, p50, small_flops)
            rows.append(row)
            print(json.dumps(row), flush=True)
            write(args.out, out)
    if "lanes" in args.hosts:
        lanes(setup, args, out)
    if args.partitions and "forward" not in rates:
        reason = "the arm measures kind forward, which --kinds leaves out"
        out["partitions"] = {"requested": args.partitions, "supported": False, "reason": reason}
    elif args.partitions:
        partitions(setup, args, out, rates["forward"])


def lanes(setup: Setup, args: argparse.Namespace, out: dict[str, Any]) -> None:
    """Host `lanes` (`two_streams_lanes.py`): the bulk alone in the loop, then beside each
    short group; the short groups' times per step against the kind `step`'s small pass alone."""
    model, bulk, seconds = setup.model, setup.lanes_bulk, 3 * args.seconds
    first = next(iter(setup.lanes_small.values()))
    two_streams_lanes.window(model, bulk, first, False, args.seconds)  # warm: the bulk's graph
    w = two_streams_lanes.window(model, bulk, first, False, seconds)
    alone_rate = Rate(w.passes, w.tokens, w.flops, w.seconds)
    out["alone"]["lanes"] = {"bulk": alone_rate.summary(), "bulk_requests": len(bulk)}
    for (priority, tokens), small in setup.lanes_small.items():
        w = two_streams_lanes.window(model, bulk, small, True, seconds)
        per_step = [g / w.steps for g in w.groups]
        kept = out["alone"].get("step", {}).get("small", {}).get(f"{priority}/{tokens}")
        p50 = kept["small_p50_ms"] / 1e3 if kept else percentile(per_step, 50)
        rate = Rate(w.passes, w.tokens, w.flops, w.seconds)
        row: dict[str, Any] = {"kind": "step", "host": "lanes", "priority": priority}
        row |= {"small_tokens": tokens, "requests": len(w.groups)}
        row |= {"request_p50_ms": round(percentile(w.groups, 50) * 1e3, 2)}
        row |= {"request_p99_ms": round(percentile(w.groups, 99) * 1e3, 2)}
        row |= beside_row(rate, alone_rate, per_step, p50, w.small_flops)
        if not kept:
            row["small_p50_over_alone"] = None
        out["beside"].append(row)
        print(json.dumps(row), flush=True)
        write(args.out, out)


def partitions(setup: Setup, args: argparse.Namespace, out: dict[str, Any], whole: Rate) -> None:
    """Arm `--partitions` (`two_streams_partitions.py`), kind `forward`, host `queued`: per
    split, the bulk on a green context of the rest alone (its rate against the whole device's,
    `whole`), each small pass alone on its k SMs, then each beside the bulk on the rest and
    beside the bulk on the whole device. A split the driver refuses is recorded, and skipped."""
    out["partitions"] = record = two_streams_partitions.header(setup.model.device, args.partitions)
    write(args.out, out)
    for split in record.get("splits", []):
        if split["error"] is None:
            try:
                split["error"] = partition(setup, args, out, whole, split)
            except Exception as exc:  # recorded: the rows before it stand
                split["error"] = f"{type(exc).__name__}: {exc}"
        torch.cuda.empty_cache()  # the split's runners, their graphs and pools, gone with it
        write(args.out, out)


def partition(
    setup: Setup,
    args: argparse.Namespace,
    out: dict[str, Any],
    whole: Rate,
    split: dict[str, Any],
) -> str | None:
    """One split's rows (see `partitions`); why there are none, or None."""
    model, record = setup.model, out["partitions"]
    made, error = two_streams_partitions.pair(split["small_sms"], split["bulk_sms"], model.device)
    if made is None:
        return error
    setup.green.append(made)  # alive while graphs captured in its contexts may be
    split |= {"small_sms": made.small.sms, "bulk_sms": made.bulk.sms}
    split |= {"way": made.way, "disjoint": made.disjoint}
    bulk_lane = green_bulk(model, setup.bulk_prompts, made.bulk)
    small_runner_ = green_runner(model, made.small)
    smalls: dict[int, Lane] = {}
    for tokens in args.small_tokens:
        work = packed(model, workloads.short(), tokens)
        with made.small.current():
            smalls[tokens] = small_lane("forward", model, small_runner_, made.small.stream, work)
        smalls[tokens].current = made.small.current
        for _ in range(3):  # the bucket's graph captured, on the green context's stream
            smalls[tokens].timed()
    bulk_alone(bulk_lane, 2, args.bulk_depth)  # warm: the bucket's graph captured
    rate = bulk_alone(bulk_lane, whole.passes, args.bulk_depth)
    share = (rate.tokens / rate.seconds) / (whole.tokens / whole.seconds)
    alone_small = {
        t: [lane.timed() for _ in range(args.small_passes)] for t, lane in smalls.items()
    }
    record["alone"][str(split["interactive_sms"])] = {
        "bulk": rate.summary(),
        "bulk_partition_share": round(share, 4),
        "small": {str(t): small_summary(times) for t, times in alone_small.items()},
    }
    on = {"rest": bulk_lane, "whole": setup.bulk["forward"]}
    for (bulk_on, lane), (tokens, small) in itertools.product(on.items(), smalls.items()):
        bulk = Bulk(lane, whole.passes, args.bulk_depth)
        flops = small.runner.stats.useful_flops
        times = measure_beside("queued", bulk, small)
        flops = small.runner.stats.useful_flops - flops
        row = {"kind": "forward", "host": "queued", "bulk_on": bulk_on, "small_tokens": tokens}
        row |= {k: split[k] for k in ("interactive_sms", "small_sms", "bulk_sms")}
        row |= beside_row(bulk.rate(), whole, times, percentile(alone_small[tokens], 50), flops)
        row["small_graphs"] = small.runner.stats.late_captures
        row["bulk_graphs"] = lane.runner.stats.late_captures
        record["rows"].append(row)
        print(json.dumps(row), flush=True)
        write(args.out, out)
    return None


def green_runner(model: OmniVoice, green: two_streams_partitions.Green) -> ModelRunner:
    """A runner of its own on the same weights whose graphs are captured, at their bucket's
    first pass, on the green context's stream (so they keep its SMs)."""
    runner, _ = small_runner(model, 0)
    runner.recorder.stream = green.stream
    return runner


def green_bulk(model: OmniVoice, prompts: list[Any], green: two_streams_partitions.Green) -> Lane:
    """The bulk batch's forward pass on a runner and a green context's stream of its own."""
    runner = green_runner(model, green)
    with green.current(), torch.inference_mode(), on_stream(green.stream):
        state = BatchState(model.model, prompts, runner)
    return Lane(runner, green.stream, forward_pass(runner, state), green.current)


def write(path: Path | None, out: dict[str, Any]) -> None:
    if path is not None:
        path.write_text(json.dumps(out, indent=2) + "\n")


# ---------------------------------------------------------------- setup


def packed(
    model: OmniVoice, requests: Sequence[workloads.Request], tokens: int
) -> tuple[list[GenerationRequest], list[Any]]:
    """The requests in order, each with all its chunks, while the packed pass (each chunk's
    conditional and unconditional rows) stays within `tokens` and the chunks within what one
    step holds (the runner's segments, a stepper's members); one request at least. And their
    prompts."""
    clone, most = voice_prompt(model), model.runner.max_segments // 2
    chosen: list[GenerationRequest] = []
    prompts: list[Any] = []
    used = 0
    for r in requests:
        req = request(r, clone)
        more = chunk_prompts(model, req)
        cost = sum(p.input_ids.shape[1] + p.target_len for p in more)
        if chosen and (used + cost > tokens or len(prompts) + len(more) > most):
            break
        chosen, prompts, used = [*chosen, req], prompts + more, used + cost
    return chosen, prompts


def bulk_lanes(model: OmniVoice, prompts: list[Any], kinds: Sequence[str]) -> dict[str, Lane]:
    """The bulk batch on the runtime's runner and the default stream, as the sidecar denoises."""
    runner = model.runner
    stream = torch.cuda.current_stream(model.device) if model.device.type == "cuda" else None
    with torch.inference_mode():
        state = BatchState(model.model, prompts, runner)
    make = {"forward": forward_pass, "step": denoising_step}
    return {kind: Lane(runner, stream, make[kind](runner, state)) for kind in kinds}


def small_lane(
    kind: str, model: OmniVoice, runner: ModelRunner, stream: torch.cuda.Stream | None, work: tuple
) -> Lane:
    requests, prompts = work
    if kind == "forward":
        with torch.inference_mode(), on_stream(stream):
            state = BatchState(model.model, prompts, runner)
        return Lane(runner, stream, forward_pass(runner, state))
    max_members = runner.max_segments // 2
    stepper = Stepper(model.prompter, model.model, runner, STEP_TOKENS.default, max_members)
    return Lane(runner, stream, stepper_step(stepper, requests))


def small_runner(model: OmniVoice, priority: int) -> tuple[ModelRunner, torch.cuda.Stream | None]:
    """A runner of its own on the same weights, its graphs captured at `priority` at their
    bucket's first pass (`capture` here only sizes its output buffer, which a later graph must
    not move), and a stream of that priority."""
    options = replace(model.runner.options, graphs_at_load=0, graph_priority=priority)
    runner = ModelRunner(model.model, options)
    runner.capture()
    stream = None
    if model.device.type == "cuda":
        stream = torch.cuda.Stream(model.device, priority=priority)
    return runner, stream


def prepare(model: OmniVoice, args: argparse.Namespace) -> Setup:
    torch.manual_seed(0)
    bulk_work = packed(model, workloads.mixed(), args.bulk_tokens)
    batches: dict[str, Any] = {"bulk": summary(model, bulk_work), "small": {}}
    bulk = bulk_lanes(model, bulk_work[1], args.kinds)
    for lane in bulk.values():  # first: the stack is traced at the bulk's shapes, as in serving
        lane.timed()
    small: dict[tuple[str, str, int], Lane] = {}
    for priority in args.priorities:
        runner, stream = small_runner(model, PRIORITIES[priority])
        for tokens in args.small_tokens:
            work = packed(model, workloads.short(), tokens)
            batches["small"][str(tokens)] = summary(model, work)
            for kind in args.kinds:
                small[kind, priority, tokens] = lane = small_lane(kind, model, runner, stream, work)
                for _ in range(3):  # the bucket's graph captured at its first pass
                    lane.timed()
    lanes_bulk, lanes_small = lanes_work(model, args, small, batches)
    return Setup(model, bulk, small, batches, bulk_work[1], lanes_bulk, lanes_small)


def lanes_work(
    model: OmniVoice,
    args: argparse.Namespace,
    small: dict[tuple[str, str, int], Lane],
    batches: dict[str, Any],
) -> tuple[list[GenerationRequest], dict[tuple[str, int], two_streams_lanes.Small]]:
    """Host `lanes`' work: the mixed requests of one round of steps (up to 60 words) within the
    bulk's tokens; the short groups on the small lanes' runners and streams."""
    if "lanes" not in args.hosts:
        return [], {}
    one_round = [r for r in workloads.mixed() if r.words <= 60]
    bulk, prompts = packed(model, one_round, args.bulk_tokens)
    batches["lanes_bulk"] = summary(model, (bulk, prompts))
    by_size: dict[tuple[str, int], two_streams_lanes.Small] = {}
    for (_, priority, tokens), lane in small.items():
        requests, _ = packed(model, workloads.short(), tokens)
        by_size[priority, tokens] = two_streams_lanes.Small(lane.runner, lane.stream, requests)
    return bulk, by_size


def summary(model: OmniVoice, work: tuple) -> dict[str, int]:
    requests, prompts = work
    tokens = sum(p.input_ids.shape[1] + p.target_len for p in prompts)
    bucket = next((n for n in model.runner.bucket_sizes if n >= tokens), 0)
    return {"requests": len(requests), "chunks": len(prompts), "tokens": tokens, "bucket": bucket}


def arguments(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--dtype", default="auto", help="the model's; auto: bfloat16 on a GPU")
    ap.add_argument("--bulk-tokens", type=int, default=MIXED_TOKENS, help="the bulk pass's size")
    ap.add_argument("--small-tokens", type=int, nargs="+", default=list(SMALL_TOKENS))
    ap.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    ap.add_argument("--hosts", nargs="+", choices=HOSTS, default=list(HOSTS))
    ap.add_argument("--priorities", nargs="+", choices=list(PRIORITIES), default=list(PRIORITIES))
    ap.add_argument("--seconds", type=float, default=1.5, help="the bulk's window, per row")
    ap.add_argument("--small-passes", type=int, default=ALONE_SMALL_PASSES, help="timed alone")
    ap.add_argument("--bulk-depth", type=int, default=2, help="bulk passes queued ahead")
    ap.add_argument(
        "--partitions",
        type=two_streams_partitions.parse_partitions,
        default=[],
        help="SMs of the small lane's green context, comma-separated (e.g. 8,16,24,32; kind "
        "forward): the SM partition arm, after the others; none by default",
    )
    ap.add_argument("--dry-run", action="store_true", help="small passes, short windows: the path")
    ap.add_argument("--commit", default="")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    if min(args.small_tokens) < 1 or args.bulk_tokens < 1 or args.bulk_depth < 1:
        ap.error("token counts and --bulk-depth must be positive")
    if args.dry_run:
        args.bulk_tokens = min(args.bulk_tokens, 600)
        args.small_tokens = [100, 300]
        args.seconds, args.small_passes = 0.0, 3
    if args.dtype == "auto":
        args.dtype = "bfloat16" if args.device.startswith("cuda") else "float32"
    return args


def main() -> int:
    args = arguments()
    started = time.perf_counter()
    # Every graph at its bucket's first pass: the bulk's one bucket, and the small runners'.
    options = RuntimeOptions(graphs_at_load=0)
    model = OmniVoice.load(args.checkpoint, args.device, args.dtype, options=options)
    out: dict[str, Any] = {
        "commit": args.commit,
        "device": args.device,
        "dtype": args.dtype,
        "torch": torch.__version__,
        "dry_run": args.dry_run,
        "load_s": round(time.perf_counter() - started, 1),
    }
    if model.device.type == "cuda":
        out["gpu"] = torch.cuda.get_device_name(model.device)
        out["stream_priorities"] = {
            name: torch.cuda.Stream(priority=p).priority for name, p in PRIORITIES.items()
        }
    setup = prepare(model, args)
    out |= setup.batches
    out["ready_s"] = round(time.perf_counter() - started, 1)
    print(json.dumps(setup.batches), flush=True)
    run(setup, args, out)
    out["seconds"] = round(time.perf_counter() - started, 1)
    write(args.out, out)
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
