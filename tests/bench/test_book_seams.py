"""bench/book_seams.py: what a segment's packets span past its audio, read from the real
encoders (PyAV), for segments of a few lengths; and its command line, small."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from supervisor.books import audio, chaptered, segments
from tests.helpers.paths import REPO_ROOT

# each encoder's delay at a segment's start, in samples at audio.RATE (libavcodec's)
DELAY = {"m4b": 1024, "mp3": 1105, "opus": 156}


@pytest.mark.parametrize("fmt", segments.CODECS)
def test_a_seam_adds_the_encoders_delay_and_less_than_a_frame_more(
    fmt: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(REPO_ROOT / "bench"))
    book_seams = importlib.import_module("book_seams")
    lengths = [audio.RATE, audio.RATE + 301, 2 * audio.RATE - 17]
    added = book_seams.added_ms(fmt, lengths, tmp_path)
    assert len(added) == len(lengths)
    for ms in added:
        assert DELAY[fmt] * 1000 / audio.RATE <= ms < chaptered.SEAM_MAX_S * 1000


def test_the_command_prints_each_formats_range() -> None:
    out = subprocess.run(
        [sys.executable, "bench/book_seams.py", "--segments", "3"],
        cwd=REPO_ROOT,
        env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    formats = "|".join(segments.CODECS)
    lines = out.splitlines()
    assert len(lines) == len(segments.CODECS), out
    for line in lines:
        assert re.fullmatch(rf"({formats}): [0-9]+-[0-9]+ ms over 3 segments", line), line
