"""`omnivoice-supervisor synth --book BOOK --out DIR`: a book made into `DIR/<book stem>.<format>`.

The book is read here (`supervisor.books`), its chapters cut into items as `POST /v1/audiobooks`
cuts them (`books.items`, within the limits `OMNIVOICE_*` sets, the server's defaults
otherwise), and the items run as any `synth` manifest does: each chapter's FLAC lands in
`DIR/.book-<stem>/` as soon as it is done, and a run again after Ctrl-C, a crash or a SIGKILL
of the server skips every chapter there already and follows the jobs an earlier run submitted,
so only what is missing is made. Once every chapter is there the book is written
(`books.chaptered`: one file, a mark per chapter, levelled as a whole), and a run with the
book already in DIR does nothing.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from supervisor.books import audio, chaptered, items, read
from supervisor.books.chaptered import Tags
from supervisor.books.model import Book, BookError
from supervisor.commands.synth_manifest import ManifestEntry

EXIT_OK, EXIT_USAGE = 0, 2


@dataclass(frozen=True)
class BookOptions:
    """`synth --book`'s own flags: the format, and the speech fields of every chapter."""

    book: Path
    format: str = "m4b"
    speech: dict[str, object] = field(default_factory=dict)  # voice, language, speed, ...


def limits() -> tuple[int, float]:
    """--max-input-chars and --max-request-audio-s as a server started here would have them:
    OMNIVOICE_MAX_INPUT_CHARS and OMNIVOICE_MAX_REQUEST_AUDIO_S, else the defaults."""
    from supervisor.settings import Settings

    chars, seconds = Settings.max_input_chars, Settings.max_request_audio_s  # the defaults
    try:
        return (
            int(os.environ.get("OMNIVOICE_MAX_INPUT_CHARS", chars)),
            float(os.environ.get("OMNIVOICE_MAX_REQUEST_AUDIO_S", seconds)),
        )
    except ValueError:
        return chars, seconds


def book_entries(
    book: Book, speech: dict[str, object]
) -> tuple[list[ManifestEntry], list[items.Span]]:
    """The book's items as manifest entries (their line: their position from 1), and each
    chapter's span of them."""
    max_chars, max_audio_s = limits()
    wanted = dict(speech)
    if "language" not in wanted and book.language:
        wanted["language"] = book.language
    planned, spans = items.plan(book, wanted, max_chars, max_audio_s)
    entries = [
        ManifestEntry(n, str(item["id"]), item, items.ITEM_FORMAT)
        for n, item in enumerate(planned, 1)
    ]
    return entries, spans


def write_book(
    target: Path,
    chapters_dir: Path,
    book: Book,
    entries: list[ManifestEntry],
    spans: list[items.Span],
    fmt: str,
) -> None:
    """The book from its chapters' files in `chapters_dir`."""

    def chapter_parts(index: int) -> list[bytes]:
        span = spans[index]
        return [
            audio.decoded((chapters_dir / f"{entry.id}.{items.ITEM_FORMAT}").read_bytes())
            for entry in entries[span.first : span.first + span.count]
        ]

    tags = Tags(book.title, book.author, book.language, book.cover, book.cover_type)
    chapters = chaptered.Chapters([span.title for span in spans], chapter_parts)
    chaptered.write(target, fmt, tags, chapters)


def run_book(options: Any, book_options: BookOptions, log: TextIO = sys.stderr) -> int:
    """The whole `synth --book` command; `options` are synth's (SynthOptions), its `out` DIR."""
    from supervisor.commands import synth

    if book_options.format not in chaptered.BOOK_FORMATS:
        print(f"synth: --format is one of {', '.join(chaptered.BOOK_FORMATS)}", file=log)
        return EXIT_USAGE
    try:
        book = read.read(book_options.book.read_bytes(), book_options.book.name)
    except OSError as exc:
        print(f"synth: cannot read the book: {exc}", file=log)
        return EXIT_USAGE
    except BookError as exc:
        print(f"synth: {book_options.book}: {exc.message}", file=log)
        return EXIT_USAGE
    stem = read.stem(book_options.book.name)
    target = options.out / f"{stem}.{book_options.format}"
    if target.exists():
        print(f"synth: {target} is there already", file=log)
        return EXIT_OK
    entries, spans = book_entries(book, book_options.speech)
    chapters_dir = options.out / f".book-{stem}"
    print(
        f"synth: {book.title!r}, {len(spans)} chapters in {len(entries)} items, "
        f"{book.chars} characters",
        file=log,
        flush=True,
    )
    status = synth.run_entries(options, entries, chapters_dir, log)
    if status != EXIT_OK:
        return status
    write_book(target, chapters_dir, book, entries, spans, book_options.format)
    print(f"synth: wrote {target}", file=log, flush=True)
    return EXIT_OK
