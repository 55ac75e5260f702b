"""The book made as its chapters come, on a real SQLite job store: the items finished one by one
(as the runner finishes them), the file there once the last is done; a book whose first chapter
is far from the rest's level is dropped (the first download makes it in two passes); a failed
chapter leaves nothing behind."""

from __future__ import annotations

import asyncio
import math
import os
import struct
import threading
from collections.abc import Iterator
from pathlib import Path

import av
import pytest

from supervisor.books import chaptered, maker, segments, shelf
from supervisor.books.items import Span
from supervisor.errors import ServerError
from supervisor.jobs.sqlite_store import SqliteJobStore
from supervisor.jobs.storage import NewItem
from supervisor.speech.audio import formats

RATE = 24000


def tone_flac(seconds: float, amplitude: int) -> bytes:
    n = round(seconds * RATE)
    pcm = b"".join(
        struct.pack("<h", round(amplitude * math.sin(2 * math.pi * 330 * i / RATE)))
        for i in range(n)
    )
    return formats.encode("flac", pcm)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteJobStore]:
    opened = SqliteJobStore(tmp_path / "data")
    yield opened
    opened.close()


def book_job(store: SqliteJobStore, data_dir: Path, count: int, parts: int = 1) -> str:
    """A job of `count` chapters, the first in `parts` items."""
    spans, first = [], 0
    for chapter in range(count):
        items = parts if chapter == 0 else 1
        spans.append(Span(f"Chapter {chapter + 1}", first, items))
        first += items
    items = [NewItem({"input": f"part {i}"}, f"item{i}", "flac") for i in range(first)]
    job_id, _ = store.create(items, "sha")
    record = shelf.Record("Book", "Me", "en", "opus", chaptered.DEFAULT_TARGET, spans)
    shelf.save(data_dir, job_id, record, None)
    return job_id


async def finish_all(store: SqliteJobStore, job_id: str, results: list[bytes]) -> None:
    for n, data in enumerate(results):
        await asyncio.sleep(0.2)  # the chapters' pace, as a sidecar makes them: not a wait
        store.claim([(job_id, n)])
        store.finish((job_id, n), "flac", data, 1, 1.0)


def run(
    data_dir: Path, job_id: str, store: SqliteJobStore, results: list[bytes], encoders: int = 2
) -> None:
    async def both() -> None:
        maker.start(data_dir, job_id, store, encoders)
        await finish_all(store, job_id, results)
        await maker.settled(job_id)

    asyncio.run(both())


def test_the_book_is_there_once_its_last_chapter_is_done(
    store: SqliteJobStore, tmp_path: Path
) -> None:
    """Three chapters, the first in two items: each mark is where its chapter starts, the
    chapter's audio, the gap and the silence of the seams after it."""
    data_dir = tmp_path / "data"
    job_id = book_job(store, data_dir, 3, parts=2)
    seconds = [0.6, 0.4, 1.5, 0.5]
    run(data_dir, job_id, store, [tone_flac(s, 6000) for s in seconds])
    path = shelf.book_file(data_dir, job_id, "opus")
    with av.open(str(path)) as book:
        starts = sorted(float(c["start"] * c["time_base"]) for c in book.chapters())
    chapters = [(seconds[0] + seconds[1], 2), (seconds[2], 1)]  # each but the last: audio, seams
    assert starts[0] == 0.0 and len(starts) == 3
    for (audio_s, seams), start, following in zip(chapters, starts, starts[1:], strict=False):
        extra = following - start - audio_s - chaptered.GAP_S
        assert 0 < extra < seams * chaptered.SEAM_MAX_S
    assert not list(path.parent.glob(".*.tmp"))


def test_a_first_chapter_off_the_books_level_drops_the_file(
    store: SqliteJobStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data_dir = tmp_path / "data"
    job_id = book_job(store, data_dir, 3)
    monkeypatch.setattr(maker, "GAIN_FROM_S", 0.5)  # the gain from the first item alone
    quiet_first = [tone_flac(1.0, 300), tone_flac(3.0, 12000), tone_flac(3.0, 12000)]
    run(data_dir, job_id, store, quiet_first)
    path = shelf.book_file(data_dir, job_id, "opus")
    assert not path.exists() and not list(path.parent.glob(".*.tmp"))
    made, _ = shelf.make(data_dir, job_id, lambda n: store.read_result(job_id, n, "flac"))
    assert made == path and path.exists()  # the first download makes it exactly


def test_a_failed_chapter_leaves_nothing_behind(store: SqliteJobStore, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    job_id = book_job(store, data_dir, 2)

    async def fail_second() -> None:
        maker.start(data_dir, job_id, store)
        await finish_all(store, job_id, [tone_flac(1.0, 6000)])
        store.claim([(job_id, 1)])
        store.fail((job_id, 1), ServerError("generation failed"))
        await maker.settled(job_id)

    asyncio.run(fail_second())
    folder = shelf.folder(data_dir, job_id)
    assert sorted(p.name for p in folder.iterdir()) == ["book.json"]


def test_a_book_stopped_mid_chapter_is_aborted_only_once_its_chapter_is_written(
    store: SqliteJobStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server stopping cancels the book's task while a thread encodes a chapter into its
    writer: aborting the writer under that thread freed what it was writing into (a crash)."""
    data_dir = tmp_path / "data"
    job_id = book_job(store, data_dir, 2)
    events: list[str] = []
    adding = threading.Event()
    real_encode, real_abort = segments.encode, chaptered.BookWriter.abort

    def encode(path: Path, fmt: str, pcm: bytes) -> tuple[int, int]:  # the real one, noted
        events.append("add")
        adding.set()
        encoded = real_encode(path, fmt, pcm)
        events.append("added")
        return encoded

    def abort(writer: chaptered.BookWriter) -> None:
        events.append("abort")
        real_abort(writer)

    monkeypatch.setattr(segments, "encode", encode)
    monkeypatch.setattr(chaptered.BookWriter, "abort", abort)
    monkeypatch.setattr(maker, "GAIN_FROM_S", 0.5)  # start on the first item, not the book's end

    async def stopped_mid_chapter() -> None:
        maker.start(data_dir, job_id, store, 1)
        await finish_all(store, job_id, [tone_flac(20.0, 6000)])
        await asyncio.to_thread(adding.wait, 60)
        # returning now: asyncio.run cancels every task left, as a server's stop does

    asyncio.run(stopped_mid_chapter())
    assert events == ["add", "added", "abort"]
    folder = shelf.folder(data_dir, job_id)
    assert sorted(p.name for p in folder.iterdir()) == ["book.json"]


def test_items_are_encoded_at_once_by_as_many_threads_as_asked(
    store: SqliteJobStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Item 0's encode waits (in its thread) until item 1's has started: a maker that encoded
    one item at a time would never get there, and the book would not be made."""
    data_dir = tmp_path / "data"
    job_id = book_job(store, data_dir, 2, parts=2)
    second_started = threading.Event()
    overlapped: list[bool] = []
    real_encode = segments.encode

    def encode(path: Path, fmt: str, pcm: bytes) -> tuple[int, int]:
        if path.name.endswith(".000001.tmp"):
            second_started.set()
        if path.name.endswith(".000000.tmp"):
            overlapped.append(second_started.wait(60))
        return real_encode(path, fmt, pcm)

    monkeypatch.setattr(segments, "encode", encode)
    run(data_dir, job_id, store, [tone_flac(s, 6000) for s in (2.0, 3.0, 1.0)], encoders=2)
    assert overlapped == [True]
    with av.open(str(shelf.book_file(data_dir, job_id, "opus"))) as book:
        assert [c["metadata"]["title"] for c in book.chapters()] == ["Chapter 1", "Chapter 2"]


def test_an_encode_that_fails_leaves_nothing_behind(
    store: SqliteJobStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An error in an encoder's thread ends the book's task without a file (the first download
    makes it), once the other threads have ended: no segment is left."""
    data_dir = tmp_path / "data"
    job_id = book_job(store, data_dir, 3)
    real_encode = segments.encode

    def encode(path: Path, fmt: str, pcm: bytes) -> tuple[int, int]:
        if path.name.endswith(".000001.tmp"):
            raise OSError("no space left on device")
        return real_encode(path, fmt, pcm)

    monkeypatch.setattr(segments, "encode", encode)
    run(data_dir, job_id, store, [tone_flac(s, 6000) for s in (1.0, 1.0, 1.0)])
    folder = shelf.folder(data_dir, job_id)
    assert sorted(p.name for p in folder.iterdir()) == ["book.json"]
    monkeypatch.undo()  # the disk has room again
    made, _ = shelf.make(data_dir, job_id, lambda n: store.read_result(job_id, n, "flac"))
    assert made.exists()


def test_a_make_that_finds_a_result_gone_leaves_nothing_behind(
    store: SqliteJobStore, tmp_path: Path
) -> None:
    """The two-pass make (`shelf.make`) stops at a missing result with ChapterGone, once its
    encoders have ended: no segment and no book are left, and a make with every result works."""
    data_dir = tmp_path / "data"
    job_id = book_job(store, data_dir, 3, parts=2)
    for n, seconds in enumerate((1.0, 0.5, 1.0, 0.5)):
        store.claim([(job_id, n)])
        store.finish((job_id, n), "flac", tone_flac(seconds, 6000), 1, seconds)
    reads: list[int] = []

    def gone_on_second_pass(n: int) -> bytes | None:
        reads.append(n)
        return None if reads.count(n) > 1 and n == 2 else store.read_result(job_id, n, "flac")

    with pytest.raises(shelf.ChapterGone):
        shelf.make(data_dir, job_id, gone_on_second_pass, encoders=2)
    assert reads.count(2) == 2  # measured, then found gone while writing
    folder = shelf.folder(data_dir, job_id)
    assert sorted(p.name for p in folder.iterdir()) == ["book.json"]
    made, _ = shelf.make(data_dir, job_id, lambda n: store.read_result(job_id, n, "flac"))
    assert made.exists()


def test_the_encoders_give_way_to_the_event_loop(
    store: SqliteJobStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each encoder thread runs at `BACKGROUND_NICE` or lower priority (its own niceness, read
    from the kernel); the thread that runs the event loop keeps its own."""
    data_dir = tmp_path / "data"
    job_id = book_job(store, data_dir, 2)
    seen: list[int] = []
    real_encode = segments.encode

    def encode(path: Path, fmt: str, pcm: bytes) -> tuple[int, int]:
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        return real_encode(path, fmt, pcm)

    monkeypatch.setattr(segments, "encode", encode)
    loop_nice = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    run(data_dir, job_id, store, [tone_flac(1.0, 6000), tone_flac(1.0, 6000)])
    assert len(seen) == 2 and min(seen) >= max(loop_nice, chaptered.BACKGROUND_NICE)
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == loop_nice
