"""bench/decode_cost.py's dry run on the CPU (the parity fixtures' tiny checkpoint): every part of
the path runs and the result file has its keys. The timings mean nothing there; the parity
section does: float32 is the reference's arithmetic on the CPU, bfloat16 is not."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.helpers.paths import REPO_ROOT

ROW_KEYS = {
    "forward_ms_alone",
    "forward_ms_beside",
    "forward_loss_pct",
    "decode_x_alone",
    "decode_x_beside",
    "mixed_loss_estimate_pct",
}


def test_dry_run(checkpoint_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "decode-cost.json"
    command = [
        sys.executable,
        str(REPO_ROOT / "bench" / "decode_cost.py"),
        str(checkpoint_dir),
        "--device",
        "cpu",
        "--dry-run",
        "--variants",
        "bf16_forward_first",
        "--out",
        str(out),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())
    [row] = result["variants"]
    assert row["name"] == "bf16_forward_first" and row["codec_dtype"] == "bfloat16"
    assert row.keys() >= ROW_KEYS
    assert row["forward_ms_alone"] > 0 and row["decode_x_alone"] > 0
    parity = result["parity"]
    assert parity["float32"] == {
        "max_abs_diff": 0.0,
        "snr_db": None,
        "min_item_snr_db": None,
        "within_parity": True,
    }
    assert parity["bfloat16"]["max_abs_diff"] > 0 and parity["bfloat16"]["snr_db"] > 10
