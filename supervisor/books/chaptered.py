"""One file for the whole book, with a mark at each chapter: M4B, MP3 or Ogg Opus.

    m4b   AAC-LC in MP4 (the `ipod` muxer), 64 kb/s; chapters as libavformat writes them (a
          QuickTime chapter track and Nero's `chpl`), the cover as `covr`
    mp3   MPEG-1 layer III (libmp3lame), 64 kb/s, with its Xing frame; ID3v2 `CTOC` and one
          `CHAP` per chapter, the cover as `APIC`
    opus  Opus in Ogg (libopus), 32 kb/s; `CHAPTER001=00:00:00.000`, `CHAPTER001NAME=...`
          comments (the Vorbis chapter extension), the cover as `METADATA_BLOCK_PICTURE`

A book is made of segments (`segments`): each of its items (a chapter, or a part of one)
levelled and encoded on its own, `GAP_S` of silence before each chapter but the first. They are
independent, so several threads encode them at once (an encoder takes one core, and one core
encodes ten hours of AAC in minutes), and each is copied into the book's one stream as soon as
every one before it is: nothing holds more than the segments being encoded, and once the last
is encoded the book is all but written. Where two segments meet, the book holds a little more
silence than their audio (under `SEAM_MAX_S`: a codec frame and its encoder's delay), at a
chapter's end or at a part's (a paragraph's end). The marks are counted on what each segment's
packets span, so each starts where its chapter's audio does, and ends where the next one starts.

The marks are known only at the end, so they are written then: libavformat writes an MP4's
chapters at its end; an MP3's and an Ogg file's chapters are tags (`tagging`). Tags: title and
album (the title), artist and album_artist (the author), language, genre; the cover through
mutagen. The book is written to a temporary name, flushed and renamed, so a file under the final
name is whole.

`write` makes a book in two passes over its chapters: one measures the whole book's loudness
(`audio.BookMeter`), the other writes it at the one gain that brings it to the target.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING

from supervisor.books import audio, segments, tagging
from supervisor.books.segments import CODECS, Segment
from supervisor.speech.audio.loudness import Target

if TYPE_CHECKING:
    from av.container.core import Chapter

MEDIA_TYPES = {"m4b": "audio/mp4", "mp3": "audio/mpeg", "opus": "audio/ogg"}
BOOK_FORMATS = tuple(CODECS)
GAP_S = 2.0
SEAM_MAX_S = 0.15  # the silence a seam adds at most: a codec frame and its encoder's delay
DEFAULT_TARGET = Target(-18.0, -3.0)  # inside ACX's RMS window for speech, peaks at -3 dBTP


@dataclass(frozen=True)
class Tags:
    title: str
    author: str | None = None
    language: str | None = None
    cover: bytes | None = None
    cover_type: str | None = None


@dataclass(frozen=True)
class Mark:
    title: str
    start_s: float
    end_s: float
    audio_s: float  # the chapter's own audio, without the gap after it


def marks(titles: Sequence[str], encoded: Sequence[Segment]) -> list[Mark]:
    """Each chapter's mark from the book's segments, all of them in order: a chapter starts
    where its first segment's audio does, and ends where the next chapter starts."""
    starts: dict[int, int] = {}
    lengths = [0] * len(titles)
    at = end = 0  # where the segment starts in the book, and where the last one's audio ends
    for segment in encoded:
        if segment.opens:
            starts[segment.chapter] = at + segment.lead
        lengths[segment.chapter] += segment.samples
        end = at + segment.lead + segment.samples
        at += segment.spanned
    if sorted(starts) != list(range(len(titles))):
        raise ValueError("every chapter needs its segments")
    bounds = [starts[index] for index in range(len(titles))] + [end]
    return [
        Mark(title, bounds[index] / audio.RATE, bounds[index + 1] / audio.RATE, length / audio.RATE)
        for index, (title, length) in enumerate(zip(titles, lengths, strict=True))
    ]


def _metadata(tags: Tags) -> dict[str, str]:
    values = {
        "title": tags.title,
        "album": tags.title,
        "artist": tags.author,
        "album_artist": tags.author,
        "language": tags.language,
        "genre": "Audiobook",
    }
    return {key: value for key, value in values.items() if value}


def _flushed(path: Path) -> None:
    with path.open("rb+") as written:
        os.fsync(written.fileno())


class BookWriter:
    """A book written a segment at a time, from any thread: `add` each, then `close` (or
    `abort`). Each segment is joined to the book as soon as every one before it is, by the
    thread that finished the last of them, so `close` has at most the last one left to join."""

    def __init__(
        self,
        path: Path,
        fmt: str,
        tags: Tags,
        titles: Sequence[str],
        gain: tuple[float, bool],
        target: Target,
    ) -> None:
        self.path, self.fmt, self.tags, self.target = path, fmt, tags, target
        self.titles = list(titles)
        self.gain_db, self.limit = gain
        self.temporary = path.with_name(f".{path.name}.tmp")
        self.stream = segments.Joined(self.temporary, fmt, _metadata(tags))
        self.encoded: dict[int, Segment] = {}  # by number, once encoded
        self.joined = 0  # segments 0 to this one, less one, are in the stream
        self.lock = threading.Lock()  # over `encoded`
        self.joining = threading.Lock()  # one thread joins at a time, in order

    def add(self, number: int, chapter: int, opens: bool, pcm: bytes) -> None:
        """Segment `number` (s16 mono at audio.RATE), item `opens` of chapter `chapter`: levelled
        at the book's gain (as long as it was), encoded into its own file, then joined with
        every one after it that is ready."""
        leveled = audio.leveled(pcm, self.gain_db, self.limit, self.target)
        lead = round(GAP_S * audio.RATE) if opens and chapter > 0 else 0
        path = self.path.with_name(f".{self.path.name}.{number:06d}.tmp")
        packets, frame = segments.encode(path, self.fmt, bytes(2 * lead) + leveled)
        segment = Segment(chapter, opens, lead, len(leveled) // 2, packets, frame, path)
        with self.lock:
            self.encoded[number] = segment
        self._join_ready()

    def _join_ready(self) -> None:
        with self.joining:
            while True:
                with self.lock:
                    segment = self.encoded.get(self.joined)
                if segment is None:
                    return
                self.stream.append(segment)
                segment.path.unlink()
                self.joined += 1

    def close(self) -> list[Mark]:
        """The book in place under its name, from every segment (0 to the last, each added);
        its marks."""
        self._join_ready()
        if self.joined != len(self.encoded):
            raise ValueError(f"segment {self.joined} was never added")
        chapters = marks(self.titles, [self.encoded[n] for n in range(self.joined)])
        self.stream.close(_chapter_list(chapters) if self.fmt == "m4b" else None)
        if self.fmt == "mp3":
            tagging.mp3_chapters(self.temporary, chapters)
        elif self.fmt == "opus":
            tagging.ogg_chapters(self.temporary, chapters)
        tagging.add_cover(self.temporary, self.fmt, self.tags.cover, self.tags.cover_type)
        _flushed(self.temporary)
        os.replace(self.temporary, self.path)
        return chapters

    def abort(self) -> None:
        """Nothing written stays (call it once no thread adds a segment)."""
        self.stream.abort()
        for left in self.path.parent.glob(f".{self.path.name}.*.tmp"):
            left.unlink(missing_ok=True)
        self.temporary.unlink(missing_ok=True)


def _chapter_list(chapters: list[Mark]) -> list[Chapter]:
    millis = Fraction(1, 1000)
    return [
        {
            "id": index,
            "start": round(mark.start_s * 1000),
            "end": round(mark.end_s * 1000),
            "time_base": millis,
            "metadata": {"title": mark.title},
        }
        for index, mark in enumerate(chapters)
    ]


def encoders(wanted: int = 0) -> int:
    """How many threads encode a book's segments: `wanted`, or for 0 half this machine's cores,
    at most 8 (the rest serve the sidecars and the HTTP edge)."""
    if wanted > 0:
        return wanted
    return max(1, min(8, (os.cpu_count() or 2) // 2))


BACKGROUND_NICE = 10


def in_background() -> None:
    """The calling thread's CPU priority lowered (Linux: a thread's own niceness): a book's
    encoders and meter give way to the event loop that serves the HTTP edge, in the same
    process, when they compete for a core."""
    with contextlib.suppress(OSError):
        tid = threading.get_native_id()
        os.setpriority(
            os.PRIO_PROCESS, tid, max(os.getpriority(os.PRIO_PROCESS, tid), BACKGROUND_NICE)
        )


def background_threads(threads: int, name: str) -> ThreadPoolExecutor:
    """A pool of `threads` at `BACKGROUND_NICE`."""
    return ThreadPoolExecutor(threads, thread_name_prefix=name, initializer=in_background)


def in_parallel(calls: Iterator[Callable[[], None]], threads: int) -> None:
    """Each call run in a pool of `threads`, at most `threads + 1` taken from `calls` at once
    (each holds a segment's audio); the first error raised, once none runs."""
    running: set[Future[None]] = set()
    with background_threads(threads, "book-encoder") as pool:
        try:
            for call in calls:
                while len(running) > threads:
                    done, running = wait(running, return_when=FIRST_COMPLETED)
                    for future in done:
                        future.result()
                running.add(pool.submit(call))
            for future in running:
                future.result()
        except BaseException:
            for future in running:
                future.cancel()
            raise


@dataclass(frozen=True)
class Chapters:
    """What `write` reads: each chapter's title, and its items' audio (s16 mono at audio.RATE),
    read when asked (twice: measured, then written)."""

    titles: Sequence[str]
    parts: Callable[[int], list[bytes]]


def write(
    path: Path,
    fmt: str,
    tags: Tags,
    chapters: Chapters,
    target: Target = DEFAULT_TARGET,
    threads: int = 0,
) -> list[Mark]:
    """The book at `path`, levelled at the whole book's gain, `threads` segments encoded at once
    (`encoders`). Its marks."""
    titles = chapters.titles
    meter = audio.BookMeter(target.measure)
    for index in range(len(titles)):
        for pcm in chapters.parts(index):
            meter.feed(pcm)
    writer = BookWriter(path, fmt, tags, titles, audio.gain_for(meter.result(), target), target)

    def calls() -> Iterator[Callable[[], None]]:
        number = 0
        for chapter in range(len(titles)):
            for part, pcm in enumerate(chapters.parts(chapter)):
                yield functools.partial(writer.add, number, chapter, part == 0, pcm)
                number += 1

    try:
        in_parallel(calls(), encoders(threads))
    except BaseException:
        writer.abort()
        raise
    return writer.close()
