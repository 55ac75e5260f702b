"""One file for the whole book, with a mark at each chapter: M4B, MP3 or Ogg Opus.

    m4b   AAC-LC in MP4 (the `ipod` muxer), 64 kb/s; chapters as libavformat writes them (a
          QuickTime chapter track and Nero's `chpl`), the cover as `covr`
    mp3   MPEG-1 layer III (libmp3lame), 64 kb/s, with its Xing frame; ID3v2 `CTOC` and one
          `CHAP` per chapter, the cover as `APIC`
    opus  Opus in Ogg (libopus), 32 kb/s; `CHAPTER001=00:00:00.000`, `CHAPTER001NAME=...`
          comments (the Vorbis chapter extension), the cover as `METADATA_BLOCK_PICTURE`

libavformat writes the audio, the chapters (but Ogg's) and the tags (title, author as `artist` and
`album_artist`, the book's title as `album`, `language`); mutagen adds the cover, which PyAV
cannot mux, and Ogg's chapter comments. Chapters are `GAP_S` apart (silence, as audiobooks have between chapters); a mark
starts where its chapter's audio starts and ends where the next one starts. The book is written
in two passes over its chapters (`audio`): one measures the whole book's loudness, the other
writes it at one gain, so at most one chapter's samples are held at a time. It is written to
a temporary name, flushed and renamed, so a file under the final name is whole.
"""

from __future__ import annotations

import base64
import importlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from supervisor.books import audio
from supervisor.speech import formats
from supervisor.speech.loudness import Target

if TYPE_CHECKING:
    from av.audio.stream import AudioStream

# format: (muxer, codec, the codec's sample format, bit rate)
CODECS: dict[str, tuple[str, str, str, int]] = {
    "m4b": ("ipod", "aac", "fltp", 64_000),
    "mp3": ("mp3", "libmp3lame", "s16p", 64_000),
    "opus": ("ogg", "libopus", "s16", 32_000),
}
MEDIA_TYPES = {"m4b": "audio/mp4", "mp3": "audio/mpeg", "opus": "audio/ogg"}
BOOK_FORMATS = tuple(CODECS)
GAP_S = 2.0
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


def marks(titles: Sequence[str], lengths: Sequence[int]) -> list[Mark]:
    """Each chapter's mark from its length in samples: the gap after each but the last."""
    out, start, gap = [], 0, round(GAP_S * audio.RATE)
    for index, (title, length) in enumerate(zip(titles, lengths, strict=True)):
        end = start + length + (gap if index + 1 < len(lengths) else 0)
        out.append(Mark(title, start / audio.RATE, end / audio.RATE, length / audio.RATE))
        start = end
    return out


def _open(path: Path, fmt: str, tags: Tags, chapters: list[Mark]) -> tuple[Any, AudioStream]:
    import av

    muxer, codec, _, bit_rate = CODECS[fmt]
    output = av.open(str(path), "w", format=muxer)
    stream = cast("AudioStream", output.add_stream(codec, rate=audio.RATE))
    stream.layout = "mono"
    stream.bit_rate = bit_rate
    values = {
        "title": tags.title,
        "album": tags.title,
        "artist": tags.author,
        "album_artist": tags.author,
        "language": tags.language,
        "genre": "Audiobook",
    }
    metadata = {key: value for key, value in values.items() if value}
    output.metadata.update(metadata)
    stream.metadata.update(metadata)  # Ogg keeps its comments on the stream
    if fmt == "opus":
        return output, stream  # its chapter comments are written after (`_ogg_chapters`)
    millis = Fraction(1, 1000)
    output.set_chapters(
        [
            {
                "id": index,
                "start": round(mark.start_s * 1000),
                "end": round(mark.end_s * 1000),
                "time_base": millis,
                "metadata": {"title": mark.title},
            }
            for index, mark in enumerate(chapters)
        ]
    )
    return output, stream


def _mutagen(name: str) -> Any:
    """A mutagen module; its constructors are not typed, so it is used as Any."""
    return importlib.import_module(f"mutagen.{name}")


def clock(seconds: float) -> str:
    """00:01:02.345, as the Vorbis chapter extension writes a start."""
    millis = round(seconds * 1000)
    hours, rest = divmod(millis, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    return f"{hours:02d}:{minutes:02d}:{rest // 1000:02d}.{rest % 1000:03d}"


def _ogg_chapters(path: Path, chapters: list[Mark]) -> None:
    """CHAPTER001=00:00:00.000 and CHAPTER001NAME=... comments (libavformat's own round a
    start to the second before adding its milliseconds, so they are written here)."""
    book = _mutagen("oggopus").OggOpus(path)
    for number, mark in enumerate(chapters, 1):
        book.tags[f"CHAPTER{number:03d}"] = [clock(mark.start_s)]
        book.tags[f"CHAPTER{number:03d}NAME"] = [mark.title]
    book.save()


def _add_cover(path: Path, fmt: str, tags: Tags) -> None:
    if tags.cover is None or tags.cover_type is None:
        return
    if fmt == "m4b":
        mp4 = _mutagen("mp4")
        png = tags.cover_type == "image/png"
        book = mp4.MP4(path)
        if book.tags is None:
            book.add_tags()
        kind = mp4.MP4Cover.FORMAT_PNG if png else mp4.MP4Cover.FORMAT_JPEG
        book.tags["covr"] = [mp4.MP4Cover(tags.cover, kind)]
        book.save()
    elif fmt == "mp3":
        id3 = _mutagen("id3")
        frames = id3.ID3(path)
        frames.add(
            id3.APIC(encoding=3, mime=tags.cover_type, type=3, desc="Cover", data=tags.cover)
        )
        frames.save(path)
    else:
        picture = _mutagen("flac").Picture()
        picture.type, picture.mime, picture.data = 3, tags.cover_type, tags.cover
        book_file = _mutagen("oggopus").OggOpus(path)
        book_file.tags["METADATA_BLOCK_PICTURE"] = [base64.b64encode(picture.write()).decode()]
        book_file.save()


def write(
    path: Path,
    fmt: str,
    tags: Tags,
    titles: Sequence[str],
    chapter_pcm: Callable[[int], bytes],
    target: Target = DEFAULT_TARGET,
) -> list[Mark]:
    """The book at `path`: chapter i's audio is `chapter_pcm(i)` (s16 mono at audio.RATE),
    asked for twice. Its marks are returned."""
    import av

    meter = audio.BookMeter(target.measure)
    lengths = []
    for index in range(len(titles)):
        pcm = chapter_pcm(index)
        meter.feed(pcm)
        lengths.append(len(pcm) // 2)
    gain, limit = audio.gain_for(meter.result(), target)
    chapters = marks(titles, lengths)
    temporary = path.with_name(f".{path.name}.tmp")
    output, stream = _open(temporary, fmt, tags, chapters)
    resampler = av.AudioResampler(format=CODECS[fmt][2], layout="mono", rate=audio.RATE)
    pts, gap = 0, bytes(2 * round(GAP_S * audio.RATE))
    try:
        for index in range(len(titles)):
            pcm = audio.leveled(chapter_pcm(index), gain, limit, target)
            if index + 1 < len(titles):
                pcm += gap
            for frame in formats.s16_frames(av.AudioFrame, pcm, audio.RATE, pts):
                pts += frame.samples
                for piece in resampler.resample(frame):
                    output.mux(stream.encode(piece))
        for piece in resampler.resample(None):
            output.mux(stream.encode(piece))
        output.mux(stream.encode(None))
    finally:
        output.close()
    if fmt == "opus":
        _ogg_chapters(temporary, chapters)
    _add_cover(temporary, fmt, tags)
    with temporary.open("rb+") as written:
        os.fsync(written.fileno())
    os.replace(temporary, path)
    return chapters
