"""What mutagen writes into a finished book file: the cover, and the chapters of the formats
whose chapters are tags (ID3v2 `CTOC` and `CHAP` in MP3, `CHAPTER001` comments in Ogg Opus).

They are written once the audio is, when every chapter's length is known (libavformat writes
an MP3's ID3 tag at its start, before any audio, and rounds an Ogg chapter's start to the
second before adding its milliseconds).
"""

from __future__ import annotations

import base64
import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

UNKNOWN_OFFSET = 0xFFFFFFFF  # a CHAP frame's byte offsets: not given, its times count


class Marked(Protocol):
    @property
    def title(self) -> str: ...
    @property
    def start_s(self) -> float: ...
    @property
    def end_s(self) -> float: ...


def _mutagen(name: str) -> Any:
    """A mutagen module; its constructors are not typed, so it is used as Any."""
    return importlib.import_module(f"mutagen.{name}")


def clock(seconds: float) -> str:
    """00:01:02.345, as the Vorbis chapter extension writes a start."""
    millis = round(seconds * 1000)
    hours, rest = divmod(millis, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    return f"{hours:02d}:{minutes:02d}:{rest // 1000:02d}.{rest % 1000:03d}"


def ogg_chapters(path: Path, chapters: Sequence[Marked]) -> None:
    """CHAPTER001=00:00:00.000 and CHAPTER001NAME=... comments."""
    book = _mutagen("oggopus").OggOpus(path)
    for number, mark in enumerate(chapters, 1):
        book.tags[f"CHAPTER{number:03d}"] = [clock(mark.start_s)]
        book.tags[f"CHAPTER{number:03d}NAME"] = [mark.title]
    book.save()


def mp3_chapters(path: Path, chapters: Sequence[Marked]) -> None:
    """A top-level, ordered `CTOC` and one `CHAP` per chapter, each titled (`TIT2`)."""
    id3 = _mutagen("id3")
    frames = id3.ID3(path)
    ids = [f"ch{number}" for number in range(len(chapters))]
    frames.add(
        id3.CTOC(
            element_id="toc",
            flags=id3.CTOCFlags.TOP_LEVEL | id3.CTOCFlags.ORDERED,
            child_element_ids=ids,
            sub_frames=[id3.TIT2(text=["Chapters"])],
        )
    )
    for element_id, mark in zip(ids, chapters, strict=True):
        frames.add(
            id3.CHAP(
                element_id=element_id,
                start_time=round(mark.start_s * 1000),
                end_time=round(mark.end_s * 1000),
                start_offset=UNKNOWN_OFFSET,
                end_offset=UNKNOWN_OFFSET,
                sub_frames=[id3.TIT2(text=[mark.title])],
            )
        )
    frames.save(path)


def add_cover(path: Path, fmt: str, cover: bytes | None, cover_type: str | None) -> None:
    """The cover as `covr` (MP4), `APIC` (MP3) or `METADATA_BLOCK_PICTURE` (Ogg Opus)."""
    if cover is None or cover_type is None:
        return
    if fmt == "m4b":
        mp4 = _mutagen("mp4")
        book = mp4.MP4(path)
        if book.tags is None:
            book.add_tags()
        png = cover_type == "image/png"
        kind = mp4.MP4Cover.FORMAT_PNG if png else mp4.MP4Cover.FORMAT_JPEG
        book.tags["covr"] = [mp4.MP4Cover(cover, kind)]
        book.save()
    elif fmt == "mp3":
        id3 = _mutagen("id3")
        frames = id3.ID3(path)
        frames.add(id3.APIC(encoding=3, mime=cover_type, type=3, desc="Cover", data=cover))
        frames.save(path)
    else:
        picture = _mutagen("flac").Picture()
        picture.type, picture.mime, picture.data = 3, cover_type, cover
        book_file = _mutagen("oggopus").OggOpus(path)
        book_file.tags["METADATA_BLOCK_PICTURE"] = [base64.b64encode(picture.write()).decode()]
        book_file.save()
