"""No dead code: vulture at 80 % confidence finds nothing in supervisor/ or sidecar/ beyond the
explained names of tests/integration/vulture_whitelist.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.helpers.paths import REPO_ROOT

WHITELIST = REPO_ROOT / "tests" / "integration" / "vulture_whitelist.py"


def vulture(*paths: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vulture", *paths, "--min-confidence", "80"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )


def test_vulture_finds_nothing_unexplained() -> None:
    found = vulture("supervisor", "sidecar", str(WHITELIST))
    assert found.returncode == 0, (
        f"dead code (remove it, or explain it in the whitelist):\n{found.stdout}"
    )


def test_the_whitelist_is_needed_and_vulture_would_speak(tmp_path: Path) -> None:
    without = vulture("supervisor", "sidecar")
    assert "AudioStream" in without.stdout  # each whitelisted name stands for a real finding
    dead = tmp_path / "dead.py"
    dead.write_text("import json\n\n\ndef f():\n    return 1\n    print('never')\n")
    found = vulture(str(dead))
    assert "unused import 'json'" in found.stdout
    assert "unreachable code" in found.stdout
