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
from typing import Any

from tests.helpers.paths import REPO_ROOT


def interpreted(code: str, *args: str) -> Any:
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(REPO_ROOT))
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        env=env,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
