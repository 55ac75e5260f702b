"""Starts and respawns on the device: the server started twice on one data directory, killed.

    python3 bench/start_arm.py --checkpoint /tmp/full --out start.json [--starts 2] [--kills 2]

Each start is `omnivoice-supervisor serve` on a fresh process with the same `--data-dir`, so
the first compiles into an empty compile cache (DATA_DIR/compile-cache, docs/DEPLOYMENT.md) and
the later ones read it back: `cold_start_s` of the first is a first start on a new machine, of
the second a restart of the service. After each start the sidecar is SIGKILLed `--kills` times
while idle (bench/kill_arm.py: kill to the first 200 after `/health` shows it ready again).

From the server's log it keeps, for every sidecar start in order, the sidecar's `start stages:`
line (exec to each progress stage, sidecar/serve/load_timer.py), the runtime's `captured ...
CUDA graphs` line (compilation, warm-up, recording; torch.compile's cache hits) and the
supervisor's `memory back` and `ready in` lines. Targets (issue 40): kill to ready <= 10 s,
cold start <= 30 s. With spares (the default on a GPU) each kill waits for the device's spare
to be parked first (bench/kill_arm.py); the spare's `start stages:` line ends with its seconds
from `go`, and the pool's `spare ...` lines say when it parked and took over.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import kill_arm  # noqa: E402

# What the log says about each start, in the order the lines come.
LOG_LINES = re.compile(
    r"start stages:|captured \d+ CUDA graphs|memory back|: ready in|compile cache|"
    r"captured the graph of|no CUDA graph for|spare|compile phases"
)


def serve(args: argparse.Namespace, data_dir: Path, log_path: Path) -> subprocess.Popen[bytes]:
    cmd = [
        sys.executable,
        "-m",
        "supervisor",
        "serve",
        "--model",
        args.checkpoint,
        "--devices",
        args.devices,
        "--port",
        str(args.port),
        "--data-dir",
        str(data_dir),
        *args.server_arg,
    ]
    with open(log_path, "w") as log:
        return subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)


def wait_ready(proc: subprocess.Popen[bytes], url: str, timeout_s: float = 900) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}; see its log")
        try:
            if httpx.get(url + "/ready", timeout=2).status_code == 200:
                return time.monotonic() - start
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise TimeoutError("server not ready")


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def one_start(args: argparse.Namespace, data_dir: Path, log_path: Path) -> dict[str, Any]:
    url = f"http://127.0.0.1:{args.port}"
    proc = serve(args, data_dir, log_path)
    try:
        out: dict[str, Any] = {"cold_start_s": round(wait_ready(proc, url), 2), "kills": []}
        for _ in range(args.kills):
            out["kills"].append(asyncio.run(kill_arm.kill_to_ready(url)))
            print(json.dumps(out["kills"][-1]), flush=True)
    finally:
        stop(proc)
    out["log"] = [
        line.strip() for line in log_path.read_text().splitlines() if LOG_LINES.search(line)
    ]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--checkpoint", default="/tmp/full")
    ap.add_argument("--devices", default="0")
    ap.add_argument("--port", type=int, default=9395)
    ap.add_argument("--starts", type=int, default=2)
    ap.add_argument("--kills", type=int, default=2)
    ap.add_argument(
        "--server-arg",
        action="append",
        default=[],
        help="one more argument for serve (repeat: --server-arg=--warmup-steps --server-arg=1)",
    )
    ap.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="the servers' --data-dir (its compile cache kept); default: a new one",
    )
    ap.add_argument("--commit", default=os.environ.get("BENCH_COMMIT", ""))
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="start-"))
    data = args.data_dir or work / "data"
    result: dict[str, Any] = {"commit": args.commit, "data_dir": str(data), "starts": []}
    for i in range(args.starts):
        started = one_start(args, data, work / f"server-{i}.log")
        result["starts"].append(started)
        kills = [k["kill_to_ready_s"] for k in started["kills"]]
        print(f"start {i}: cold_start_s {started['cold_start_s']}, kill_to_ready_s {kills}")
        print("\n".join(started["log"]), flush=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    firsts = result["starts"]
    result["cold_start_s"] = [s["cold_start_s"] for s in firsts]
    result["kill_to_ready_s"] = [k["kill_to_ready_s"] for s in firsts for k in s["kills"]]
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: result[k] for k in ("cold_start_s", "kill_to_ready_s")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
