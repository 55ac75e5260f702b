"""What a book's job needs besides its items, kept in the data directory, and the book file.

    <data dir>/books/<job id>/book.json    title, author, language, format, loudness target,
                                           each chapter's title and its items
    <data dir>/books/<job id>/cover        the cover image, if the book has one
    <data dir>/books/<job id>/book.<fmt>   the whole book, made on the first download

Each is written to a temporary name, flushed and renamed. The record is written right after
the job is committed; a book whose job is gone (removed after its retention) is removed by
`tidy`, which each new audiobook runs. With PostgreSQL, the record is on the server that took
the book: its items run on any server, its content is served by that one.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from supervisor.books import audio, chaptered
from supervisor.books.chaptered import Tags
from supervisor.books.items import Span
from supervisor.speech.audio.loudness import Target

BOOKS_DIR = "books"
_making: dict[str, threading.Lock] = {}
_making_lock = threading.Lock()


@dataclass(frozen=True)
class Record:
    title: str
    author: str | None
    language: str | None
    format: str
    target: Target
    chapters: list[Span]
    cover_type: str | None = None


class ChapterGone(Exception):
    """An item's result is no longer in the job store."""


def folder(data_dir: str | Path, job_id: str) -> Path:
    return Path(data_dir) / BOOKS_DIR / job_id


def _write(path: Path, data: bytes) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    with temporary.open("wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(temporary, path)


def save(data_dir: str | Path, job_id: str, record: Record, cover: bytes | None) -> None:
    where = folder(data_dir, job_id)
    where.mkdir(parents=True, exist_ok=True)
    if cover is not None:
        _write(where / "cover", cover)
    _write(where / "book.json", json.dumps(asdict(record)).encode())
    descriptor = os.open(where, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def load(data_dir: str | Path, job_id: str) -> tuple[Record, bytes | None] | None:
    where = folder(data_dir, job_id)
    try:
        raw = json.loads((where / "book.json").read_bytes())
    except FileNotFoundError:
        return None
    raw["target"] = Target(**raw["target"])
    raw["chapters"] = [Span(**span) for span in raw["chapters"]]
    record = Record(**raw)
    cover = (where / "cover").read_bytes() if record.cover_type else None
    return record, cover


def book_file(data_dir: str | Path, job_id: str, fmt: str) -> Path:
    return folder(data_dir, job_id) / f"book.{fmt}"


def make(
    data_dir: str | Path,
    job_id: str,
    read_item: Callable[[int], bytes | None],
    encoders: int = 0,
) -> tuple[Path, Record]:
    """The book's file, made from its items' results the first time (once, however many ask
    at the same time; `encoders` threads encode it, `chaptered.encoders`). ChapterGone if an
    item's result is missing."""
    found = load(data_dir, job_id)
    if found is None:
        raise FileNotFoundError(job_id)
    record, cover = found
    path = book_file(data_dir, job_id, record.format)
    with _making_lock:
        lock = _making.setdefault(job_id, threading.Lock())
    with lock:
        if not path.exists():

            def chapter_parts(index: int) -> list[bytes]:
                span = record.chapters[index]
                parts = []
                for n in range(span.first, span.first + span.count):
                    data = read_item(n)
                    if data is None:
                        raise ChapterGone(f"the result of item {n} is gone from the job store")
                    parts.append(audio.decoded(data))
                return parts

            tags = Tags(record.title, record.author, record.language, cover, record.cover_type)
            titles = [span.title for span in record.chapters]
            chapters = chaptered.Chapters(titles, chapter_parts)
            chaptered.write(path, record.format, tags, chapters, record.target, encoders)
    return path, record


def tidy(data_dir: str | Path, exists: Callable[[str], bool]) -> int:
    """Remove the books whose job is gone; how many."""
    root = Path(data_dir) / BOOKS_DIR
    removed = 0
    for where in root.iterdir() if root.is_dir() else ():
        if where.is_dir() and not exists(where.name):
            shutil.rmtree(where, ignore_errors=True)
            removed += 1
    return removed
