"""bench/book_maker_cpu.py, run as its command line runs it, small: a real store and the real
maker make the book, and the script prints its rate (the rate itself is a benchmark's, not
checked here)."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.helpers.paths import REPO_ROOT


def test_the_maker_bench_makes_a_book_and_prints_its_rate() -> None:
    out = subprocess.run(
        [
            *(sys.executable, "bench/book_maker_cpu.py", "--chapters", "2", "--parts", "2"),
            *("--seconds", "3", "--encoders", "2", "--arrival-x", "50"),
        ],
        cwd=REPO_ROOT,
        env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout
    assert re.fullmatch(
        r"12 s of audio in [0-9.]+ s: [0-9]+ x realtime, encoder threads 2, tail [0-9.]+ s\n", out
    ), out
