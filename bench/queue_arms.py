"""The harness's arms about queues and restarts: `job`, `bulk` and `kill` (`--arms`).

They run after the mixed arm, in that order (then `book`, bench/book_arm.py; the kill last: it
restarts the sidecar), and add to the result `job_x_realtime`, `job_to_http_ratio`,
`book_x_realtime`, `book_to_job_ratio`, `interactive_under_bulk_first_audio_p50_s`
and `_p99_s`, `interactive_idle_first_audio_p50_s` and `_p99_s`, `bulk_throughput_share`,
`kill_to_ready_s` and `cold_start_s` (see docs/PERFORMANCE.md).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import book_arm
import job_arm
import kill_arm
import workloads


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def add_flags(ap: argparse.ArgumentParser) -> None:
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


async def run(
    args: argparse.Namespace, url: str, mixed: list[workloads.Request], out: dict[str, Any]
) -> None:
    """The selected arms, their figures put in `out` (the result's `server`)."""
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
    if "book" in args.arms:
        log(f"book: a {args.book_chars}-character book through /v1/audiobooks")
        out["book"] = await book_arm.book(url, args.book_chars)
        log(f"book: {out['book']}")
    if "kill" in args.arms:
        log("kill: SIGKILL the sidecar, until it serves again")
        out["kill"] = await kill_arm.kill_to_ready(url)
        log(f"kill: {out['kill']}")


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
    result["interactive_idle_first_audio_p50_s"] = idle.get("p50")
    result["interactive_idle_first_audio_p99_s"] = idle.get("p99")
    result["bulk_throughput_share"] = bulk["throughput_share"] if bulk else None
    result["bulk_total_throughput_share"] = bulk["total_throughput_share"] if bulk else None
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
