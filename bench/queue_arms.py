"""The harness's arms about queues and restarts: `sweep`, `job`, `bulk` and `kill` (`--arms`).

They run after the mixed arm, in that order (then `book`, bench/book_arm.py; the kill last: it
restarts the sidecar), and add to the result `interactive_sweep`, `job_x_realtime`,
`job_to_http_ratio`, `book_x_realtime`, `book_to_job_ratio`,
`interactive_under_bulk_first_audio_p50_s` and `_p99_s`, `interactive_under_bulk_underrun_p99_s`,
`interactive_idle_first_audio_p50_s` and `_p99_s`, `bulk_throughput_share`,
`bulk_total_throughput_share`, `kill_to_ready_s` and `cold_start_s` (see docs/PERFORMANCE.md);
with `--trace-spans`, `interactive_under_bulk_slowest` (bench/span_breakdown.py), and the same
breakdown of each sweep rate's slowest 1 % under the rate's `slowest_spans` in `server.sweep`.

`sweep`: short interactive requests alone on the idle server, streamed, at each of
`--sweep-rates` per second for `--sweep-seconds` each: first audio p50/p99, the audio made
over the wall (x realtime) and the player's wait per stream (`stream_timing`), p99.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

import book_arm
import job_arm
import kill_arm
import span_breakdown
import workloads


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


SWEEP_SEED = 9  # the sweep's requests: short ones, none shared with the bulk arm's
SWEEP_MIN_REQUESTS = 20  # a rate's run sends at least this many, however short


def add_flags(ap: argparse.ArgumentParser) -> None:
    ap.add_argument(
        "--sweep-rates",
        default="1,5,10,20,40",
        help="the sweep arm's rates, interactive requests per second (comma-separated)",
    )
    ap.add_argument(
        "--sweep-seconds",
        type=float,
        default=20.0,
        help="how long the sweep arm sends at each rate",
    )
    ap.add_argument(
        "--bulk-requests",
        type=int,
        help="the bulk arm's job: the first N mixed requests (default all; with all, and the job "
        "arm run, the job arm's figure is its throughput alone)",
    )
    ap.add_argument(
        "--interactive-rate",
        type=float,
        default=10.0,
        help="interactive requests per second beside the bulk job",
    )
    ap.add_argument(
        "--interactive-max",
        type=int,
        default=1500,
        help="at most this many interactive requests beside the bulk job (they stop when it ends)",
    )
    ap.add_argument(
        "--interactive-idle",
        type=int,
        default=50,
        help="interactive requests on the idle server first, at the same rate, for comparison",
    )
    ap.add_argument(
        "--trace-spans",
        type=Path,
        metavar="FILE",
        help="the server writes its spans to FILE (OMNIVOICE_TRACE_FILE), and the bulk arm "
        "reports where the slowest 1 %% of the interactive requests beside the job spent their "
        "time (interactive_under_bulk_slowest; bench/span_breakdown.py)",
    )
    ap.add_argument(
        "--interactive-stream",
        choices=("sse", "audio"),
        default="sse",
        help="how the interactive requests stream (their first audio is timed)",
    )
    ap.add_argument(
        "--book-chars",
        type=int,
        default=500_000,
        help="the book arm's book, in characters (bench/book_arm.py)",
    )


def configure(args: argparse.Namespace) -> None:
    """Before the server starts: what its environment needs for the arms' flags."""
    if args.trace_spans:
        args.trace_spans.unlink(missing_ok=True)
        os.environ.update(span_breakdown.server_env(args.trace_spans.resolve()))


async def run(
    args: argparse.Namespace, url: str, mixed: list[workloads.Request], out: dict[str, Any]
) -> None:
    """The selected arms, their figures put in `out` (the result's `server`)."""
    if "sweep" in args.arms:
        out["sweep"] = await sweep(url, args)
    if "job" in args.arms:
        log(f"job: {len(mixed)} mixed items as one job")
        out["job"] = await job_arm.job(url, mixed)
        log(f"job: {out['job']}")
    if "bulk" in args.arms:
        bulk = mixed[: args.bulk_requests]
        alone = out.get("job") if len(bulk) == len(mixed) else None
        log(
            f"bulk: a {len(bulk)}-item job beside interactive requests at "
            f"{args.interactive_rate}/s ({args.interactive_stream})"
        )
        interactive = workloads.short(args.interactive_idle + args.interactive_max, seed=5)
        out["bulk"] = await job_arm.bulk(
            url,
            bulk,
            interactive,
            args.interactive_rate,
            args.interactive_stream,
            args.interactive_idle,
            alone,
        )
        log(f"bulk: share {out['bulk']['throughput_share']}")
        if args.trace_spans:
            slow = out["bulk"]["interactive_under_bulk"]["slowest"]
            out["bulk"]["slowest_spans"] = span_breakdown.report(args.trace_spans, slow)
    if "book" in args.arms:
        log(f"book: a {args.book_chars}-character book through /v1/audiobooks")
        out["book"] = await book_arm.book(url, args.book_chars)
        log(f"book: {out['book']}")
    if "kill" in args.arms:
        log("kill: SIGKILL the sidecar, until it serves again")
        out["kill"] = await kill_arm.kill_to_ready(url)
        log(f"kill: {out['kill']}")


async def sweep(url: str, args: argparse.Namespace) -> dict[str, Any]:
    """Each rate alone on the idle server, lowest first."""
    rates = [float(rate) for rate in args.sweep_rates.split(",")]
    requests = workloads.short(
        sum(max(SWEEP_MIN_REQUESTS, int(r * args.sweep_seconds)) for r in rates), seed=SWEEP_SEED
    )
    out: dict[str, Any] = {}
    for rate in rates:
        count = max(SWEEP_MIN_REQUESTS, int(rate * args.sweep_seconds))
        batch, requests = requests[:count], requests[count:]
        log(f"sweep: {count} requests at {rate:g}/s ({args.interactive_stream})")
        run = await job_arm.interactive(url, batch, rate, args.interactive_stream)
        if args.trace_spans:  # where the rate's slowest 1 % spent their time, as for the bulk
            run["slowest_spans"] = span_breakdown.report(args.trace_spans, run["slowest"])
        out[f"{rate:g}"] = run
        log(f"sweep {rate:g}/s: first audio {run['first_audio_s']}")
    return out


def sweep_keys(sweep: dict[str, Any]) -> dict[str, dict[str, float | None]]:
    """`interactive_sweep`: per rate, first audio p50/p99, x realtime, the player's wait p99."""
    return {
        rate: {
            "p50_s": run["first_audio_s"].get("p50"),
            "p99_s": run["first_audio_s"].get("p99"),
            "x_realtime": run["x_realtime"],
            "underrun_p99_s": run["underrun_s"].get("p99"),
        }
        for rate, run in sweep.items()
    }


def keys(result: dict[str, Any]) -> None:
    """The arms' headline figures at the result's top level (None where an arm did not run)."""
    s = result["server"]
    job = s.get("job")
    result["job_x_realtime"] = job["x_realtime"] if job else None
    http = result.get("mixed_http_x_realtime")
    result["job_to_http_ratio"] = round(job["x_realtime"] / http, 3) if job and http else None
    bulk = s.get("bulk")
    loaded = bulk["interactive_under_bulk"]["first_audio_s"] if bulk else {}
    idle = bulk["interactive_idle"]["first_audio_s"] if bulk else {}
    result["interactive_under_bulk_first_audio_p50_s"] = loaded.get("p50")
    result["interactive_under_bulk_first_audio_p99_s"] = loaded.get("p99")
    underrun = bulk["interactive_under_bulk"].get("underrun_s", {}) if bulk else {}
    result["interactive_under_bulk_underrun_p99_s"] = underrun.get("p99")
    result["interactive_sweep"] = sweep_keys(s["sweep"]) if "sweep" in s else None
    result["interactive_idle_first_audio_p50_s"] = idle.get("p50")
    result["interactive_idle_first_audio_p99_s"] = idle.get("p99")
    result["bulk_throughput_share"] = bulk["throughput_share"] if bulk else None
    result["interactive_under_bulk_slowest"] = bulk.get("slowest_spans") if bulk else None
    result["bulk_total_throughput_share"] = bulk["total_throughput_share"] if bulk else None
    lag = bulk.get("loop_lag", {}) if bulk else {}
    result["bulk_event_loop_lag_p99_s"] = lag.get("p99_s")
    result["bulk_event_loop_lag_max_s"] = lag.get("max_s")
    profile = bulk.get("loaded_profile") if bulk else None
    result["bulk_forward_share_of_wall"] = profile["forward_share_of_wall"] if profile else None
    book = s.get("book")
    result["book_x_realtime"] = book["x_realtime"] if book else None
    result["book_to_job_ratio"] = (
        round(book["x_realtime"] / job["x_realtime"], 3)
        if book and job and job["x_realtime"]
        else None
    )
    result["kill_to_ready_s"] = s["kill"]["kill_to_ready_s"] if "kill" in s else None
    result["cold_start_s"] = result.get("server_ready_s")
