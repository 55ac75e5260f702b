"""The supervisor's own overhead: short speech requests per second with the model out of the picture.

    python bench/http_overhead.py [--requests 20000] [--connections 64] [--format pcm] [--out FILE]

Starts `omnivoice-supervisor serve --engine null` (the sidecar answers with silence of the
estimated length after its denoising steps: frames, batching and supervision are all real;
only the model is missing), then drives it from a second process with a load generator made
of raw keep-alive HTTP/1.1 connections (a few microseconds of client work per request, so the
figure is the server's, not the client's). Every answer is checked: status 200 and the audio
length the text asks for. `--url` measures a server that is already running instead.

Prints requests per second, latency percentiles, and the server's CPU time per request.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sidecar.shared.duration import FRAME_RATE, target_tokens

REPO_ROOT = Path(__file__).resolve().parents[1]
TEXT = "Hello."  # 28 codec frames, 1.12 s of audio by the duration rule
KEY = "bench-key"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def connection(
    host: str, port: int, request: bytes, count: int, expect_bytes: int, latencies: list[float]
) -> int:
    """Send `count` requests one after another on one keep-alive connection; returns failures."""
    reader, writer = await asyncio.open_connection(host, port)
    failures = 0
    for _ in range(count):
        started = time.perf_counter()
        writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        body = await reader.readexactly(length)
        latencies.append(time.perf_counter() - started)
        if status != 200 or len(body) != expect_bytes:
            failures += 1
    writer.close()
    return failures


def load(host: str, port: int, fmt: str, requests: int, connections: int, queue: Any) -> None:
    """The load generator (its own process)."""
    body = json.dumps(
        {"model": "tts-1", "input": TEXT, "voice": "alloy", "response_format": fmt}
    ).encode()
    request = (
        f"POST /v1/audio/speech HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {KEY}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    expect = target_tokens(TEXT) * 960 * 2 + (
        44 if fmt == "wav" else 0
    )  # the null engine: silence of the estimate

    async def run() -> tuple[float, list[float], int]:
        latencies: list[float] = []
        per = requests // connections
        started = time.perf_counter()
        failures = await asyncio.gather(
            *(connection(host, port, request, per, expect, latencies) for _ in range(connections))
        )
        return time.perf_counter() - started, latencies, sum(failures)

    queue.put(asyncio.run(run()))


def commit() -> str:
    """HEAD's hash, marked when the work tree has changes."""
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    ).stdout
    return head + ("-dirty" if dirty.strip() else "")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(
    host: str, port: int, server_pid: int | None, args: argparse.Namespace
) -> dict[str, Any]:
    queue: Any = multiprocessing.Queue()
    # A warm-up round first: connections, caches, the throughput estimate.
    warm = multiprocessing.Process(
        target=load, args=(host, port, args.format, args.connections * 10, args.connections, queue)
    )
    warm.start()
    queue.get()
    warm.join()
    server = psutil.Process(server_pid) if server_pid else None
    cpu_before = sum(server.cpu_times()[:2]) if server else 0.0
    children = server.children(recursive=True) if server else []
    sidecar_before = sum(sum(c.cpu_times()[:2]) for c in children)
    generator = multiprocessing.Process(
        target=load, args=(host, port, args.format, args.requests, args.connections, queue)
    )
    generator.start()
    wall, latencies, failures = queue.get()
    generator.join()
    result: dict[str, Any] = {
        "requests": len(latencies),
        "failures": failures,
        "connections": args.connections,
        "format": args.format,
        "wall_s": round(wall, 3),
        "requests_per_s": round(len(latencies) / wall, 1),
        "latency_ms": {
            q: round(percentile(latencies, p) * 1000, 2)
            for q, p in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))
        },
        "log_level": args.log_level,
        "audio_s_per_request": target_tokens(TEXT) / FRAME_RATE,
        "cpus": os.cpu_count(),
        "commit": commit(),
    }
    if server is not None:
        result["supervisor_cpu_ms_per_request"] = round(
            (sum(server.cpu_times()[:2]) - cpu_before) * 1000 / len(latencies), 3
        )
        result["sidecar_cpu_ms_per_request"] = round(
            (sum(sum(c.cpu_times()[:2]) for c in children) - sidecar_before)
            * 1000
            / len(latencies),
            3,
        )
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--format", choices=("pcm", "wav"), default="pcm")
    parser.add_argument(
        "--log-level", default="warning", help="the server's; at info it logs a line per request"
    )
    parser.add_argument(
        "--url",
        help="measure this running server (host:port, started with --api-key bench-key) instead",
    )
    parser.add_argument("--out", type=Path, help="also write the result as JSON here")
    args = parser.parse_args()
    if args.url:
        host, _, port = args.url.removeprefix("http://").partition(":")
        result = measure(host, int(port), None, args)
    else:
        port = free_port()
        argv = [
            sys.executable,
            "-m",
            "supervisor",
            "serve",
            "--engine",
            "null",
            "--port",
            str(port),
            "--api-key",
            KEY,
            "--log-level",
            args.log_level,
            "--data-dir",
            "/tmp/omnivoice-bench",
        ]
        server = subprocess.Popen(
            argv, cwd=REPO_ROOT, stderr=subprocess.DEVNULL if args.log_level != "warning" else None
        )
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=1) as probe:
                        probe.sendall(b"GET /ready HTTP/1.1\r\nHost: x\r\n\r\n")
                        if b" 200 " in probe.recv(100):
                            break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    raise SystemExit("the server did not become ready")
                time.sleep(0.1)
            result = measure("127.0.0.1", port, server.pid, args)
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(30)
    print(json.dumps(result, indent=2))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if result["failures"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
