"""A book made while its chapters are: each chapter levelled and encoded as soon as it is done,
rather than all of them after the last (encoding ten hours of audio takes a CPU core minutes).

The whole book's loudness is known only at the end, so the gain is taken from the first chapter
(the same voice reads the whole book, at one level), with the limiter on to hold the peaks. At
the end the whole book's loudness is measured (it was fed to a meter chapter by chapter); if the
gain it asks for is more than `TOLERANCE_DB` from the one used, the file made is dropped and the
first download makes the book again in two passes (`shelf.make`), exactly. The same happens if
the server stops meanwhile: what was written is a temporary file, replaced by the next make.

One task per book, started when its job is created; it polls the job store for its items in
reading order (each chapter's items done, then its results read), and ends without a file if an
item fails, is cancelled, or the job is gone. A chapter is decoded, measured and levelled while
the one before is encoded, each in a thread: the encoder and the filters release the
interpreter's lock, so the two take two cores (docs/PERFORMANCE.md, "Audiobooks").
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from supervisor.books import audio, items, shelf
from supervisor.books.chaptered import BookWriter, Tags
from supervisor.jobs.storage import JobStorage

log = logging.getLogger("omnivoice.books")

POLL_S = 0.5
TOLERANCE_DB = 1.0  # EBU R128 allows a programme +-1 LU where +-0.5 cannot be met
_running: dict[str, asyncio.Task[None]] = {}
T = TypeVar("T")


class _Dropped(Exception):
    """No book from this task: an item will never be done, or the gain was off."""


def start(data_dir: str | Path, job_id: str, store: JobStorage) -> None:
    """Make the book of `job_id` as its chapters come, in the background."""
    task = asyncio.create_task(_follow(data_dir, job_id, store), name=f"book {job_id}")
    _running[job_id] = task
    task.add_done_callback(lambda _: _running.pop(job_id, None))


async def settled(job_id: str) -> None:
    """Once the book's task (if it runs) has ended, whatever its end."""
    task = _running.get(job_id)
    if task is not None:
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await asyncio.shield(task)


async def _results(job_id: str, span: items.Span, store: JobStorage) -> list[bytes] | None:
    """The chapter's results once every item of it is done; None if one never will be."""
    out = []
    for n in range(span.first, span.first + span.count):
        while True:
            item = await asyncio.to_thread(store.item, job_id, n)
            if item is None or item["state"] in ("failed", "cancelled"):
                return None
            if item["state"] == "done":
                break
            await asyncio.sleep(POLL_S)
        data = await asyncio.to_thread(store.read_result, job_id, n, items.ITEM_FORMAT)
        if data is None:
            return None
        out.append(data)
    return out


def _decoded(results: list[bytes]) -> bytes:
    return b"".join(audio.decoded(data) for data in results)


def _first_gain(pcm: bytes, record: shelf.Record) -> float:
    meter = audio.BookMeter(record.target.measure)
    meter.feed(pcm)
    return audio.gain_for(meter.result(), record.target)[0]


def _measured_and_leveled(meter: audio.BookMeter, writer: BookWriter, pcm: bytes) -> bytes:
    meter.feed(pcm)
    return writer.level(pcm)


def _in_thread(call: Callable[..., T], *args: object) -> asyncio.Future[T]:
    """`call` started in a thread: a plain future, not a task, so that nothing cancels it."""
    context = contextvars.copy_context()
    return asyncio.get_running_loop().run_in_executor(
        None, functools.partial(context.run, call, *args)
    )


async def _ended(running: asyncio.Future[T]) -> T:
    """`running`'s value once it has ended, even if the task is cancelled meanwhile (the server
    stopping cancels every task): the writer is aborted only once no thread writes into it,
    never under one."""
    try:
        return await asyncio.shield(running)
    except asyncio.CancelledError:
        while not running.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait([running])
        raise


async def _writing(call: Callable[..., T], *args: object) -> T:
    """`call` in a thread, run to its end (`_ended`)."""
    return await _ended(_in_thread(call, *args))


async def _follow(data_dir: str | Path, job_id: str, store: JobStorage) -> None:
    found = await asyncio.to_thread(shelf.load, data_dir, job_id)
    if found is None:
        return
    record, cover = found
    path = shelf.book_file(data_dir, job_id, record.format)
    tags = Tags(record.title, record.author, record.language, cover, record.cover_type)
    meter = audio.BookMeter(record.target.measure)
    writer: BookWriter | None = None
    encoding: asyncio.Future[None] | None = None  # the chapter before's, in its thread
    gain = 0.0
    try:
        for span in record.chapters:
            results = await _results(job_id, span, store)
            if results is None:
                raise _Dropped  # no book will be made: leave nothing behind
            pcm = await asyncio.to_thread(_decoded, results)
            if writer is None:
                gain = await asyncio.to_thread(_first_gain, pcm, record)
                writer = await asyncio.to_thread(
                    BookWriter, path, record.format, tags, (gain, True), record.target
                )
            leveled = await asyncio.to_thread(_measured_and_leveled, meter, writer, pcm)
            if encoding is not None:
                await _ended(encoding)
            encoding = _in_thread(writer.add_leveled, span.title, leveled)
        if encoding is not None:
            await _ended(encoding)
        whole = await asyncio.to_thread(meter.result)
        exact = audio.gain_for(whole, record.target)[0]
        if writer is None or abs(exact - gain) > TOLERANCE_DB:
            log.info(
                "book %s: its first chapter's level was off by %.1f dB; made again",
                job_id,
                exact - gain,
            )
            raise _Dropped
        await _writing(writer.close)
    except _Dropped:
        await _aborted(writer, encoding)
    except asyncio.CancelledError:
        await _aborted(writer, encoding)
        raise
    except Exception:
        log.exception("book %s: made on its first download instead", job_id)
        await _aborted(writer, encoding)


async def _aborted(writer: BookWriter | None, encoding: asyncio.Future[None] | None) -> None:
    """The writer aborted once its last encode has ended (whatever it ended with)."""
    if encoding is not None:
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await _ended(encoding)
    if writer is not None:
        writer.abort()
