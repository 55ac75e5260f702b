"""The book maker on this machine's CPU (no GPU, no model): how fast `supervisor.books.maker`
turns finished items into one M4B, levelled (the limiter on) and encoded, and how long the file
takes after the last item.

    PYTHONPATH=$PWD .venv/bin/python bench/book_maker_cpu.py [--chapters 8] [--parts 1]
        [--seconds 60] [--encoders N] [--arrival-x 0]

A real SQLite job store holds a book job of `--chapters` chapters of `--parts` items each; every
item is finished with `--seconds` of a noise signal (FLAC, as the runner stores them). With
`--arrival-x 0` they are all finished at once, and the maker's x realtime is the audio's seconds
over the wall's from the first item to the file: the most the book path can reach once a GPU
makes the items faster than this. With `--arrival-x X` the items are finished in reading order
at X times realtime (the pace of a GPU making the book), and `tail` is what the book path adds to
it: the seconds from the last item finished to the file.
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


def item_flac(seconds: float, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    n = round(seconds * formats.SAMPLE_RATE)
    envelope = np.sin(np.linspace(0, 400, n))  # a level that moves, as speech's does
    signal = (rng.standard_normal(n) * 0.2 * envelope).clip(-1, 1)
    return formats.encode("flac", (signal * 32767).astype("<i2").tobytes())


async def make(
    data_dir: Path, store: SqliteJobStore, args: argparse.Namespace
) -> tuple[float, float]:
    """The wall's seconds from the first item finished to the file, and from the last."""
    count = args.chapters * args.parts
    items = [NewItem({"input": f"part {i}"}, f"item{i}", "flac") for i in range(count)]
    job_id, _ = store.create(items, "bench")
    spans = [Span(f"Chapter {c + 1}", c * args.parts, args.parts) for c in range(args.chapters)]
    record = shelf.Record("Book", "Bench", "en", "m4b", chaptered.DEFAULT_TARGET, spans)
    shelf.save(data_dir, job_id, record, None)
    results = [item_flac(args.seconds, n) for n in range(count)]
    maker.start(data_dir, job_id, store, args.encoders)
    first = time.perf_counter()
    for n, data in enumerate(results):
        if args.arrival_x > 0:  # this item's end, at the GPU's pace
            due = first + (n + 1) * args.seconds / args.arrival_x
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
        await asyncio.to_thread(store.claim, [(job_id, n)])
        await asyncio.to_thread(store.finish, (job_id, n), "flac", data, 1, args.seconds)
    last = time.perf_counter()
    await maker.settled(job_id)
    end = time.perf_counter()
    if not shelf.book_file(data_dir, job_id, "m4b").exists():
        raise SystemExit("no book was made (its level was off: the maker dropped it)")
    return end - first, end - last


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chapters", type=int, default=8)
    ap.add_argument("--parts", type=int, default=1, help="items in each chapter")
    ap.add_argument("--seconds", type=float, default=60.0, help="each item's audio")
    ap.add_argument("--encoders", type=int, default=0, help="0: the server's default")
    ap.add_argument("--arrival-x", type=float, default=0.0, help="0: every item done at once")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteJobStore(Path(tmp) / "data")
        try:
            wall, tail = asyncio.run(make(Path(tmp) / "data", store, args))
        finally:
            store.close()
    audio_s = args.chapters * args.parts * args.seconds
    print(
        f"{audio_s:.0f} s of audio in {wall:.2f} s: {audio_s / wall:.0f} x realtime, "
        f"encoder threads {chaptered.encoders(args.encoders)}, tail {tail:.2f} s"
    )


if __name__ == "__main__":
    main()
