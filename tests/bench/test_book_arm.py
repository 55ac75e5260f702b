"""bench/book_arm.py against a live server on the tiny checkpoint, with a short book: every part
of the arm runs (the book written, sent, made, downloaded, its progress printed while it is
made) and its result has its keys. The figures mean nothing on the CPU."""

from __future__ import annotations

import asyncio
import importlib
from pathlib import Path

import pytest

from supervisor.books import read
from tests.helpers.live_server import live
from tests.helpers.paths import REPO_ROOT


def test_the_book_arm_makes_and_downloads_a_short_book(
    checkpoint_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.syspath_prepend(str(REPO_ROOT / "bench"))
    book_arm = importlib.import_module("book_arm")
    monkeypatch.setattr(book_arm, "PROGRESS_S", 0.0)  # every poll prints
    text = book_arm.book_text(6000)
    parsed = read.read(text.encode(), "long-book.md")
    assert len(parsed.chapters) == book_arm.CHAPTERS and 6000 <= len(text) < 12000
    with live(tmp_path, checkpoint=checkpoint_dir, key=None) as server:
        result = asyncio.run(book_arm.book(server.url, 300, "opus", chapters=3))
    assert result["state"] == "completed" and result["content_status"] == 200
    assert result["chapters"] == 3 and result["items"] >= result["chapters"]
    assert result["content_bytes"] > 0 and result["audio_s"] > 0 and result["x_realtime"] > 0
    printed = [line for line in capsys.readouterr().out.splitlines() if "book: {" in line]
    assert printed and "'total': " in printed[0], printed
