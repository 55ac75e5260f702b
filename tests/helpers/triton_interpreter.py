"""Running a Triton kernel's check on the CPU, in Triton's interpreter (TRITON_INTERPRET=1).

The variable must be set before Triton decorates a kernel, so each check runs in an interpreter
process of its own: `interpreted(code, *args)` runs `code` with the repository on its path and
returns the JSON of its last printed line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def interpreted(code: str, *args: str) -> Any:
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
