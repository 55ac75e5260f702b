"""A book's chapters as job items: one item per chapter, or several (its parts) for a chapter
longer than one speech request may be.

A job item is a speech request, bounded as every request is (`--max-input-chars`, and
`--max-request-audio-s` of estimated audio), and a chapter is often longer (a novel's runs to
30 minutes and more). Such a chapter is cut into parts at paragraph ends, a paragraph too long
at sentence ends, a sentence too long at spaces; each part is one item, and the book joins them
back into one chapter. The items then go through the jobs route's own checks (`job_items`: the
text read as the model will read it, its cost after expansion), so a book is admitted exactly
as the same requests sent to `POST /v1/jobs` would be.

Each item is `ch001` for a chapter in one piece, `ch001-p2` for the second part of one in
several, carries its chapter's `title`, and is made as FLAC: lossless, as the book is encoded once more, levelled as a whole.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from supervisor.books.model import Book
from supervisor.jobs.finish_times import item_audio_s
from supervisor.jobs.item_fields import MAX_TITLE_CHARS

ITEM_FORMAT = "flac"
SENTENCE_END = re.compile(r"(?<=[.!?…。！？])\s+")
AUDIO_SHARE = 0.8  # of --max-request-audio-s a part may be estimated at (the estimate is rough)
# Each part's first chunk (its later chunks' voice prompt) about this long: a whole chunk as the
# prompt made a book dearer to run per second of audio than a job (docs/PERFORMANCE.md,
# "Audiobooks").
FIRST_CHUNK_S = 5.0


@dataclass(frozen=True)
class Span:
    """A chapter's title and its items, `first` to `first + count - 1`."""

    title: str
    first: int
    count: int


def _pieces(text: str, pattern: re.Pattern[str] | None) -> list[str]:
    if pattern is None:
        return text.split()
    return [piece for piece in pattern.split(text) if piece.strip()]


def _pack(pieces: list[str], joiner: str, fits: Any) -> list[str]:
    out: list[str] = []
    for piece in pieces:
        joined = f"{out[-1]}{joiner}{piece}" if out else piece
        if out and fits(joined):
            out[-1] = joined
        else:
            out.append(piece)
    return out


def parts(text: str, max_chars: int, max_audio_s: float, speed: float | None = None) -> list[str]:
    """The text cut into parts that each fit one request, at the largest boundary that works."""

    def fits(piece: str) -> bool:
        return len(piece) <= max_chars and item_audio_s(piece, speed) <= max_audio_s

    if fits(text):
        return [text]
    levels: list[tuple[re.Pattern[str] | None, str]] = [
        (re.compile(r"\n\s*\n"), "\n\n"),
        (SENTENCE_END, " "),
        (None, " "),
    ]
    return _cut(text, levels, fits)


def _cut(text: str, levels: list[tuple[re.Pattern[str] | None, str]], fits: Any) -> list[str]:
    if fits(text):
        return [text]
    if not levels:  # a single word too long: cut where it must be
        half = max(1, len(text) // 2)
        return _cut(text[:half], [], fits) + _cut(text[half:], [], fits)
    pattern, joiner = levels[0]
    pieces: list[str] = []
    for piece in _pieces(text, pattern):
        pieces.extend(_cut(piece, levels[1:], fits) if not fits(piece) else [piece])
    return _pack(pieces, joiner, fits)


def plan(
    book: Book, speech: dict[str, object], max_chars: int, max_audio_s: float
) -> tuple[list[dict[str, object]], list[Span]]:
    """The job's items (each `speech` with its `id`, `input`, `response_format` and a short
    `first_chunk_s`) and each chapter's span of them."""
    items: list[dict[str, object]] = []
    spans = []
    sent_speed = speech.get("speed")
    speed = float(sent_speed) if isinstance(sent_speed, (int, float)) else None
    for number, chapter in enumerate(book.chapters, 1):
        pieces = parts(chapter.text, max_chars, max_audio_s * AUDIO_SHARE, speed)
        spans.append(Span(chapter.title, len(items), len(pieces)))
        for part, piece in enumerate(pieces, 1):
            item_id = f"ch{number:03d}" if len(pieces) == 1 else f"ch{number:03d}-p{part}"
            item = {
                "id": item_id,
                **speech,
                "input": piece,
                "response_format": ITEM_FORMAT,
                "first_chunk_s": FIRST_CHUNK_S,
            }
            items.append({**item, "title": chapter.title[:MAX_TITLE_CHARS]})
    return items, spans
