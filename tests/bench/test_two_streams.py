"""bench/two_streams.py: its summary's arithmetic and arguments, and its dry run on the CPU (the
parity fixtures' tiny checkpoint), where every part of the path runs without streams and the
result has its keys. The timings mean nothing there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench import two_streams
from tests.helpers.paths import REPO_ROOT

ROW_KEYS = {
    "kind",
    "host",
    "priority",
    "small_tokens",
    "small_p50_ms",
    "small_p99_ms",
    "small_passes",
    "small_p50_over_alone",
    "bulk_ms_per_pass",
    "bulk_tokens_per_s",
    "bulk_tflops",
    "bulk_share",
    "total_tflops",
}


def test_percentile_is_the_nearest_rank() -> None:
    values = [float(v) for v in range(100, 0, -1)]  # 100 .. 1, unordered on purpose
    assert two_streams.percentile(values, 50) == 50.0
    assert two_streams.percentile(values, 99) == 99.0
    assert two_streams.percentile(values, 100) == 100.0
    assert two_streams.percentile([7.0], 99) == 7.0
    assert two_streams.percentile([1.0, 2.0, 3.0], 0) == 1.0


def test_beside_row_compares_with_alone() -> None:
    alone = two_streams.Rate(passes=10, tokens=100_000, flops=2e12, seconds=1.0)
    beside = two_streams.Rate(passes=10, tokens=100_000, flops=2e12, seconds=1.25)
    small = [0.003] * 98 + [0.004, 0.010]
    row = two_streams.beside_row(beside, alone, small, 0.002, 0.5e12)
    assert row["small_p50_ms"] == 3.0 and row["small_p99_ms"] == 4.0
    assert row["small_passes"] == 100 and row["small_p50_over_alone"] == 1.5
    assert row["bulk_share"] == 0.8  # the bulk's tokens a second beside over alone
    assert row["bulk_ms_per_pass"] == 125.0 and row["bulk_tokens_per_s"] == 80_000
    assert row["bulk_tflops"] == 1.6 and row["total_tflops"] == 2.0


def test_arguments() -> None:
    args = two_streams.arguments(["/ckpt", "--device", "cpu"])
    assert args.small_tokens == [500, 1000, 1500, 3000] and args.dtype == "float32"
    assert args.kinds == ["forward", "step"]
    assert args.hosts == ["queued", "interleaved", "threads", "lanes"]
    assert two_streams.arguments(["/ckpt"]).dtype == "bfloat16"
    dry = two_streams.arguments(["/ckpt", "--device", "cpu", "--dry-run"])
    assert dry.bulk_tokens == 600 and dry.seconds == 0.0 and dry.small_passes == 3
    with pytest.raises(SystemExit):
        two_streams.arguments(["/ckpt", "--small-tokens", "0"])
    with pytest.raises(SystemExit):
        two_streams.arguments(["/ckpt", "--hosts", "nowhere"])


def test_dry_run(checkpoint_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "two-streams.json"
    command = [
        sys.executable,
        str(REPO_ROOT / "bench" / "two_streams.py"),
        str(checkpoint_dir),
        "--device",
        "cpu",
        "--dry-run",
        "--priorities",
        "high",
        "--partitions",
        "8,16",
        "--out",
        str(out),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())
    assert json.loads(done.stdout.splitlines()[-1]) == result
    assert result["bulk"]["tokens"] > 0 and result["bulk"]["bucket"] >= result["bulk"]["tokens"]
    rows = result["beside"]
    seen = {(r["kind"], r["host"]) for r in rows}
    hosts = set(two_streams.HOSTS) - {"lanes"}
    assert seen == {(k, h) for k in two_streams.KINDS for h in hosts} | {("step", "lanes")}
    for row in rows:
        assert row.keys() >= ROW_KEYS, row
        assert row["priority"] == "high" and row["small_passes"] >= 1
        assert row["bulk_share"] > 0 and row["small_p50_ms"] > 0
    for lanes in (r for r in rows if r["host"] == "lanes"):
        assert lanes["requests"] >= 1 and lanes["request_p50_ms"] > lanes["small_p50_ms"] > 0
    assert result["alone"]["lanes"]["bulk"]["bulk_passes"] >= 1
    # No green contexts on the CPU: the arm says why, and every other row above stands.
    assert result["partitions"] == {
        "requested": [8, 16],
        "supported": False,
        "reason": "not a CUDA device: cpu",
    }
    for kind in two_streams.KINDS:
        assert result["alone"][kind]["bulk"]["bulk_passes"] >= 2
        assert {k.split("/")[0] for k in result["alone"][kind]["small"]} == {"high"}


def test_partitions_need_the_forward_kind(checkpoint_dir: Path, tmp_path: Path) -> None:
    """The partition arm measures forward passes: without them it records why, and the run
    goes on."""
    out = tmp_path / "two-streams.json"
    command = [sys.executable, str(REPO_ROOT / "bench" / "two_streams.py"), str(checkpoint_dir)]
    command += ["--device", "cpu", "--dry-run", "--priorities", "high", "--kinds", "step"]
    command += ["--hosts", "queued", "--partitions", "8", "--out", str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())
    assert {(r["kind"], r["host"]) for r in result["beside"]} == {("step", "queued")}
    assert result["partitions"]["supported"] is False
    assert "kind forward" in result["partitions"]["reason"]
