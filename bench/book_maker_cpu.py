"""The book maker's rate on this machine's CPU (no GPU, no model): how fast `supervisor.books.maker`
turns finished chapters into one M4B, levelled (the limiter on) and encoded.

    PYTHONPATH=$PWD .venv/bin/python bench/book_maker_cpu.py [--chapters 8] [--seconds 60]

A real SQLite job store holds a book job of `--chapters` one-item chapters; every item is
finished at once with `--seconds` of a noise signal (FLAC, as the runner stores them), then the
maker runs from the first chapter to the file. Prints the audio's seconds over the wall's: the
maker's x realtime, which the book path's whole x realtime cannot exceed once the GPU makes the
chapters faster than this.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

import numpy as np

from supervisor.books import chaptered, maker, shelf
from supervisor.books.items import Span
from supervisor.jobs.sqlite_store import SqliteJobStore
from supervisor.jobs.storage import NewItem
from supervisor.speech.audio import formats


def chapter_flac(seconds: float, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    n = round(seconds * formats.SAMPLE_RATE)
    envelope = np.sin(np.linspace(0, 400, n))  # a level that moves, as speech's does
    signal = (rng.standard_normal(n) * 0.2 * envelope).clip(-1, 1)
    return formats.encode("flac", (signal * 32767).astype("<i2").tobytes())


async def make(data_dir: Path, store: SqliteJobStore, chapters: int, seconds: float) -> float:
    items = [NewItem({"input": f"part {i}"}, f"ch{i:03d}", "flac") for i in range(chapters)]
    job_id, _ = store.create(items, "bench")
    spans = [Span(f"Chapter {i + 1}", i, 1) for i in range(chapters)]
    record = shelf.Record("Book", "Bench", "en", "m4b", chaptered.DEFAULT_TARGET, spans)
    shelf.save(data_dir, job_id, record, None)
    results = [chapter_flac(seconds, i) for i in range(chapters)]
    for n, data in enumerate(results):
        store.claim([(job_id, n)])
        store.finish((job_id, n), "flac", data, 1, seconds)
    start = time.perf_counter()
    maker.start(data_dir, job_id, store)
    await maker.settled(job_id)
    wall = time.perf_counter() - start
    if not shelf.book_file(data_dir, job_id, "m4b").exists():
        raise SystemExit("no book was made (its level was off: the maker dropped it)")
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chapters", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=60.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteJobStore(Path(tmp) / "data")
        try:
            wall = asyncio.run(make(Path(tmp) / "data", store, args.chapters, args.seconds))
        finally:
            store.close()
    audio_s = args.chapters * args.seconds
    print(f"{audio_s:.0f} s of audio in {wall:.2f} s: {audio_s / wall:.0f} x realtime")


if __name__ == "__main__":
    main()
