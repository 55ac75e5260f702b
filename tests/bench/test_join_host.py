"""bench/join_host.py on the CPU (the parity fixtures' tiny checkpoint): its variants run the
same arrivals, the finisher variant decodes every request, and the report has its keys. The
timings mean nothing there (it is a GPU bench)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

from bench.join_host import quantile
from tests.helpers.paths import REPO_ROOT


def test_quantile_is_the_nearest_rank_from_below() -> None:
    assert quantile([3.0, 1.0, 2.0, 4.0], 0.5) == 3.0
    assert quantile([float(v) for v in range(100)], 0.99) == 99.0
    assert math.isnan(quantile([], 0.5))  # no requests


def test_a_cpu_run_of_two_variants(checkpoint_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "join-host.json"
    command = [sys.executable, str(REPO_ROOT / "bench" / "join_host.py"), str(checkpoint_dir)]
    command += ["--rate", "4", "--seconds", "0.5", "--warm-seconds", "0"]
    command += ["--variants", "plain:0.5:2,finisher:5", "--out", str(out)]
    env = {**os.environ, "DEV": "cpu", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    plain, finisher = json.loads(out.read_text())
    assert plain["requests"] == finisher["requests"] >= 1  # the same arrivals, seeded
    assert (plain["depth"], finisher["depth"]) == (2, 0)
    assert (plain["switch_interval_ms"], finisher["switch_interval_ms"]) == (0.5, 5.0)
    assert plain["frames"] == 0 and finisher["frames"] == finisher["requests"]
    for result in (plain, finisher):
        assert result["builds"] >= 1 and result["passes"] >= 32
        assert result["tokens_on_device_p99_s"] >= result["tokens_on_device_p50_s"] > 0
