"""A book made while its chapters are: each item levelled and encoded as soon as it is done.

Each item becomes a segment of its own (`chaptered`), several encoded at once, rather than all
of the book after its last item (one core encodes ten hours of audio in minutes, and a GPU makes
them faster than that).

The whole book's loudness is known only at the end, so the gain is taken from the book's first
`GAIN_FROM_S` of audio (the same voice reads the whole book, at one level), with the limiter on
to hold the peaks. At the end the whole book's loudness is measured (it was fed to a meter item
by item, in reading order); if the gain it asks for is more than `TOLERANCE_DB` from the one
used, the file made is dropped and the first download makes the book again in two passes
(`shelf.make`), exactly. The same happens if the server stops meanwhile: what was written is
temporary files, replaced by the next make.

One task per book, started when its job is created; it polls the job store for its items in
reading order, and ends without a file if an item fails, is cancelled, or the job is gone. Each
item, decoded here, goes to the meter's thread and to one of the encoders' threads
(`--book-encoders`), which levels and encodes it: the encoder and the filters release the
interpreter's lock, so each thread takes a core (docs/PERFORMANCE.md, "Audiobooks"). At most one
item more than there are encoders is in hand, so the maker holds a few items' audio, not the
book's.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from supervisor.books import audio, chaptered, items, shelf
from supervisor.books.chaptered import BookWriter, Tags
from supervisor.jobs.storage import JobStorage

log = logging.getLogger("omnivoice.books")

POLL_S = 0.5
TOLERANCE_DB = 1.0  # EBU R128 allows a programme +-1 LU where +-0.5 cannot be met
GAIN_FROM_S = 60.0
_running: dict[str, asyncio.Task[None]] = {}
T = TypeVar("T")


class _Dropped(Exception):
    """No book from this task: an item will never be done, or the gain was off."""


@dataclass(frozen=True)
class _Part:
    """One item's audio, and where it goes in the book."""

    number: int
    chapter: int
    opens: bool  # its chapter's first item
    pcm: bytes


def start(data_dir: str | Path, job_id: str, store: JobStorage, encoders: int = 0) -> None:
    """Make the book of `job_id` as its chapters come, in the background, `encoders` items at
    once (`chaptered.encoders`)."""
    threads = chaptered.encoders(encoders)
    task = asyncio.create_task(_follow(data_dir, job_id, store, threads), name=f"book {job_id}")
    _running[job_id] = task
    task.add_done_callback(lambda _: _running.pop(job_id, None))


async def settled(job_id: str) -> None:
    """Once the book's task (if it runs) has ended, whatever its end."""
    task = _running.get(job_id)
    if task is not None:
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await asyncio.shield(task)


async def _result(job_id: str, number: int, store: JobStorage) -> bytes:
    """Item `number`'s result once it is done; _Dropped if it never will be."""
    while True:
        item = await asyncio.to_thread(store.item, job_id, number)
        if item is None or item["state"] in ("failed", "cancelled"):
            raise _Dropped
        if item["state"] == "done":
            break
        await asyncio.sleep(POLL_S)
    data = await asyncio.to_thread(store.read_result, job_id, number, items.ITEM_FORMAT)
    if data is None:
        raise _Dropped
    return data


async def _parts(job_id: str, record: shelf.Record, store: JobStorage) -> AsyncIterator[_Part]:
    """Each item's audio in reading order, as it is done."""
    for chapter, span in enumerate(record.chapters):
        for number in range(span.first, span.first + span.count):
            data = await _result(job_id, number, store)
            pcm = await asyncio.to_thread(audio.decoded, data)
            yield _Part(number, chapter, number == span.first, pcm)


def _gain(leading: list[_Part], record: shelf.Record) -> float:
    meter = audio.BookMeter(record.target.measure, peak=False)
    for part in leading:
        meter.feed(part.pcm)
    return audio.gain_for(meter.result(), record.target)[0]


class _Lanes:
    """The meter's thread (items in reading order) and the encoders' threads, each item in hand
    until both have it done; the first error of either."""

    def __init__(self, writer: BookWriter, meter: audio.BookMeter, threads: int) -> None:
        self.writer, self.meter, self.threads = writer, meter, threads
        self.meter_thread = chaptered.background_threads(1, "book-meter")
        self.encoder_threads = chaptered.background_threads(threads, "book-encoder")
        self.in_hand: set[asyncio.Future[Any]] = set()

    def _in(self, pool: ThreadPoolExecutor, call: Callable[..., None], *args: object) -> Any:
        context = contextvars.copy_context()
        loop = asyncio.get_running_loop()
        return loop.run_in_executor(pool, functools.partial(context.run, call, *args))

    async def add(self, part: _Part) -> None:
        while len(self.in_hand) > self.threads:
            done, self.in_hand = await asyncio.wait(
                self.in_hand, return_when=asyncio.FIRST_COMPLETED
            )
            for each in done:
                each.result()
        metered = self._in(self.meter_thread, self.meter.feed, part.pcm)
        where = (part.number, part.chapter, part.opens)
        encoded = self._in(self.encoder_threads, self.writer.add, *where, part.pcm)
        self.in_hand.add(asyncio.gather(metered, encoded))

    async def drained(self) -> None:
        """Every item in hand done (its error raised)."""
        for each in list(self.in_hand):
            await each
        self.in_hand.clear()

    async def stopped(self) -> None:
        """Nothing more starts, and no thread runs, whatever the items ended with (the writer is
        aborted only once no thread writes into it)."""
        for each in self.in_hand:
            each.cancel()  # what has not started never will; a running thread runs on
        for pool in (self.meter_thread, self.encoder_threads):
            pool.shutdown(wait=False, cancel_futures=True)
        await _to_end(asyncio.ensure_future(asyncio.to_thread(self._joined)))
        await _to_end(asyncio.gather(*self.in_hand, return_exceptions=True))  # errors retrieved

    def _joined(self) -> None:
        self.meter_thread.shutdown(wait=True)
        self.encoder_threads.shutdown(wait=True)


async def _to_end(future: asyncio.Future[T]) -> T:
    """`future`'s value once it has ended, even if the task is cancelled meanwhile (the server
    stopping cancels every task): the cancel is raised after it."""
    cancelled = False
    while not future.done():
        try:
            await asyncio.wait([future])
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError
    return future.result()


async def _follow(data_dir: str | Path, job_id: str, store: JobStorage, threads: int) -> None:
    found = await asyncio.to_thread(shelf.load, data_dir, job_id)
    if found is None:
        return
    record, cover = found
    path = shelf.book_file(data_dir, job_id, record.format)
    tags = Tags(record.title, record.author, record.language, cover, record.cover_type)
    titles = [span.title for span in record.chapters]
    meter = audio.BookMeter(record.target.measure, peak=False)
    lanes: _Lanes | None = None
    leading: list[_Part] = []  # the first items, until the gain is known
    gain = 0.0

    async def start_writing() -> _Lanes:
        """The writer at the gain of the leading items, which it takes first."""
        nonlocal gain, lanes
        gain = await asyncio.to_thread(_gain, leading, record)
        writer = BookWriter(path, record.format, tags, titles, (gain, True), record.target)
        lanes = _Lanes(writer, meter, threads)  # in hand before any thread runs: aborted on error
        for part in leading:
            await lanes.add(part)
        leading.clear()
        return lanes

    try:
        async for part in _parts(job_id, record, store):
            if lanes is not None:
                await lanes.add(part)
                continue
            leading.append(part)
            if sum(len(each.pcm) for each in leading) >= 2 * GAIN_FROM_S * audio.RATE:
                await start_writing()
        lanes = lanes or await start_writing()
        await lanes.drained()
        exact = audio.gain_for(await asyncio.to_thread(meter.result), record.target)[0]
        if abs(exact - gain) > TOLERANCE_DB:
            log.info(
                "book %s: its first minute's level was off by %.1f dB; made again",
                job_id,
                exact - gain,
            )
            raise _Dropped
        await _closed(lanes)
    except _Dropped:
        await _aborted(lanes)
    except asyncio.CancelledError:
        await _aborted(lanes)
        raise
    except Exception:
        log.exception("book %s: made on its first download instead", job_id)
        await _aborted(lanes)


async def _closed(lanes: _Lanes) -> None:
    """The book joined from its segments, in a thread run to its end."""
    try:
        await _to_end(asyncio.ensure_future(asyncio.to_thread(lanes.writer.close)))
    finally:
        await lanes.stopped()


async def _aborted(lanes: _Lanes | None) -> None:
    """The writer aborted once no thread writes into it."""
    if lanes is not None:
        try:
            await lanes.stopped()
        finally:
            lanes.writer.abort()
