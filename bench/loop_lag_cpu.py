"""Does the supervisor's event loop stall beside a big job? On the CPU, with the null engine: a
server whose sidecar makes silence at once, so that only the supervisor's own work is timed.

    PYTHONPATH=$PWD .venv/bin/python bench/loop_lag_cpu.py [--items 1000] [--rate 10]

A job of `--items` of the harness's mixed texts (clones spoken by the built-in voice), and beside
it the harness's short requests over SSE at `--rate` a second until the job ends (the `bulk`
arm's load, `bench/job_arm.py`); the loop's lag (`omnivoice_event_loop_lag_seconds`) is read
from /metrics before and after. Prints one JSON object: the job, the interactive first audio
(machine noise on a shared CPU, not a figure of the device) and the lag (`job_arm.loop_lag`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import job_arm
import workloads
from start_arm import stop, wait_ready

ROOT = Path(__file__).resolve().parents[1]


async def measure(url: str, items: int, rate: float) -> dict[str, Any]:
    bulk = [
        replace(r, kind="auto", voice="auto") if r.kind == "clone" else r
        for r in workloads.mixed(items)
    ]
    before = await job_arm.lag_buckets(url)
    ended = asyncio.Event()

    async def run_job() -> dict[str, Any]:
        try:
            return await job_arm.job(url, bulk, 5)
        finally:
            ended.set()

    job = asyncio.create_task(run_job())
    beside = await job_arm.interactive(url, workloads.short(400), rate, "sse", until=ended)
    return {
        "job": await job,
        "interactive_requests": beside["requests"],
        "interactive_first_audio_s": beside["first_audio_s"],
        "loop_lag": job_arm.loop_lag(before, await job_arm.lag_buckets(url)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--items", type=int, default=1000)
    ap.add_argument("--rate", type=float, default=10.0)
    ap.add_argument("--port", type=int, default=9395)
    args = ap.parse_args()
    url = f"http://127.0.0.1:{args.port}"
    with tempfile.TemporaryDirectory() as data_dir:
        command = [sys.executable, "-m", "supervisor", "serve", "--engine", "null"]
        command += ["--num-step", "4", "--port", str(args.port), "--data-dir", data_dir]
        with open(Path(data_dir) / "server.log", "w") as log:
            proc = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_ready(proc, url)
            print(json.dumps(asyncio.run(measure(url, args.items, args.rate)), indent=1))
        finally:
            stop(proc)


if __name__ == "__main__":
    main()
