"""The book made as its chapters come, on a real SQLite job store: the items finished one by one
(as the runner finishes them), the file there once the last is done; a book whose first chapter
is far from the rest's level is dropped (the first download makes it in two passes); a failed
chapter leaves nothing behind."""

from __future__ import annotations

import asyncio
import math
import struct
import threading
from collections.abc import Iterator
from pathlib import Path

import av
import pytest

from supervisor.books import chaptered, maker, shelf
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


def book_job(store: SqliteJobStore, data_dir: Path, count: int) -> str:
    items = [NewItem({"input": f"part {i}"}, f"ch00{i + 1}", "flac") for i in range(count)]
    job_id, _ = store.create(items, "sha")
    spans = [Span(f"Chapter {i + 1}", i, 1) for i in range(count)]
    record = shelf.Record("Book", "Me", "en", "opus", chaptered.DEFAULT_TARGET, spans)
    shelf.save(data_dir, job_id, record, None)
    return job_id


async def finish_all(store: SqliteJobStore, job_id: str, results: list[bytes]) -> None:
    for n, data in enumerate(results):
        await asyncio.sleep(0.2)  # the chapters' pace, as a sidecar makes them: not a wait
        store.claim([(job_id, n)])
        store.finish((job_id, n), "flac", data, 1, 1.0)


def run(data_dir: Path, job_id: str, store: SqliteJobStore, results: list[bytes]) -> None:
    async def both() -> None:
        maker.start(data_dir, job_id, store)
        await finish_all(store, job_id, results)
        await maker.settled(job_id)

    asyncio.run(both())


def test_the_book_is_there_once_its_last_chapter_is_done(
    store: SqliteJobStore, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    job_id = book_job(store, data_dir, 3)
    run(data_dir, job_id, store, [tone_flac(1.0, 6000), tone_flac(1.5, 6000), tone_flac(0.5, 6000)])
    path = shelf.book_file(data_dir, job_id, "opus")
    with av.open(str(path)) as book:
        starts = sorted(float(c["start"] * c["time_base"]) for c in book.chapters())
    assert starts == pytest.approx(
        [0.0, 1.0 + chaptered.GAP_S, 2.5 + 2 * chaptered.GAP_S], abs=0.002
    )
    assert not list(path.parent.glob(".*.tmp"))


def test_a_first_chapter_off_the_books_level_drops_the_file(
    store: SqliteJobStore, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    job_id = book_job(store, data_dir, 3)
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
    real_add, real_abort = chaptered.BookWriter.add_leveled, chaptered.BookWriter.abort

    def add(writer: chaptered.BookWriter, title: str, pcm: bytes) -> None:  # the real one, noted
        events.append("add")
        adding.set()
        real_add(writer, title, pcm)
        events.append("added")

    def abort(writer: chaptered.BookWriter) -> None:
        events.append("abort")
        real_abort(writer)

    monkeypatch.setattr(chaptered.BookWriter, "add_leveled", add)
    monkeypatch.setattr(chaptered.BookWriter, "abort", abort)

    async def stopped_mid_chapter() -> None:
        maker.start(data_dir, job_id, store)
        await finish_all(store, job_id, [tone_flac(20.0, 6000)])
        await asyncio.to_thread(adding.wait, 60)
        # returning now: asyncio.run cancels every task left, as a server's stop does

    asyncio.run(stopped_mid_chapter())
    assert events == ["add", "added", "abort"]
    folder = shelf.folder(data_dir, job_id)
    assert sorted(p.name for p in folder.iterdir()) == ["book.json"]


def test_a_chapter_is_levelled_while_the_one_before_is_encoded(
    store: SqliteJobStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chapter 1's encode waits (in its thread) until chapter 2 has been levelled: a maker that
    encoded and levelled in turn would never get there, and the book would not be made."""
    data_dir = tmp_path / "data"
    job_id = book_job(store, data_dir, 2)
    levelled: list[int] = []
    second_levelled = threading.Event()
    overlapped: list[bool] = []
    real_level, real_add = chaptered.BookWriter.level, chaptered.BookWriter.add_leveled

    def level(writer: chaptered.BookWriter, pcm: bytes) -> bytes:
        levelled.append(len(pcm))
        if len(levelled) == 2:
            second_levelled.set()
        return real_level(writer, pcm)

    def add_leveled(writer: chaptered.BookWriter, title: str, pcm: bytes) -> None:
        if title == "Chapter 1":
            overlapped.append(second_levelled.wait(60))
        real_add(writer, title, pcm)

    monkeypatch.setattr(chaptered.BookWriter, "level", level)
    monkeypatch.setattr(chaptered.BookWriter, "add_leveled", add_leveled)
    run(data_dir, job_id, store, [tone_flac(2.0, 6000), tone_flac(3.0, 6000)])
    assert overlapped == [True]
    with av.open(str(shelf.book_file(data_dir, job_id, "opus"))) as book:
        assert [c["metadata"]["title"] for c in book.chapters()] == ["Chapter 1", "Chapter 2"]
