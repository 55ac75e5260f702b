"""One file for the whole book, with a mark at each chapter: M4B, MP3 or Ogg Opus.

    m4b   AAC-LC in MP4 (the `ipod` muxer), 64 kb/s; chapters as libavformat writes them (a
          QuickTime chapter track and Nero's `chpl`), the cover as `covr`
    mp3   MPEG-1 layer III (libmp3lame), 64 kb/s, with its Xing frame; ID3v2 `CTOC` and one
          `CHAP` per chapter, the cover as `APIC`
    opus  Opus in Ogg (libopus), 32 kb/s; `CHAPTER001=00:00:00.000`, `CHAPTER001NAME=...`
          comments (the Vorbis chapter extension), the cover as `METADATA_BLOCK_PICTURE`

`BookWriter` takes the chapters one at a time, as they come, levels each with the gain it was
given and encodes it, `GAP_S` of silence before each but the first, so nothing holds more than
one chapter. The chapter marks are known only at the end, so they are written then: an M4B's
audio goes to a file of its own first and is copied (not encoded again) into the book with its
chapters (libavformat takes an MP4's chapters before its first packet); an MP3's and an Ogg
file's chapters are tags (`tagging`). Tags: title and album (the title), artist and
album_artist (the author), language, genre; the cover through mutagen. A mark starts where its
chapter's audio starts and ends where the next one starts. The book is written to a temporary
name, flushed and renamed, so a file under the final name is whole.

`write` makes a book in two passes over its chapters: one measures the whole book's loudness
(`audio.BookMeter`), the other writes it at the one gain that brings it to the target.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from supervisor.books import audio, tagging
from supervisor.speech.audio import formats
from supervisor.speech.audio.loudness import Target

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
    """A book written a chapter at a time: `add` each, then `close` (or `abort`)."""

    def __init__(
        self, path: Path, fmt: str, tags: Tags, gain: tuple[float, bool], target: Target
    ) -> None:
        import av

        self.path, self.fmt, self.tags, self.target = path, fmt, tags, target
        self.gain_db, self.limit = gain
        self.temporary = path.with_name(f".{path.name}.tmp")
        # an M4B's audio first goes here, then is copied into the book with its chapters
        self.audio_file = (
            path.with_name(f".{path.name}.audio.tmp") if fmt == "m4b" else self.temporary
        )
        muxer, codec, sample_format, bit_rate = CODECS[fmt]
        self.output = av.open(str(self.audio_file), "w", format=muxer)
        self.stream = cast("AudioStream", self.output.add_stream(codec, rate=audio.RATE))
        self.stream.layout = "mono"
        self.stream.bit_rate = bit_rate
        self.output.metadata.update(_metadata(tags))
        self.stream.metadata.update(_metadata(tags))  # Ogg keeps its comments on the stream
        self.resampler = av.AudioResampler(format=sample_format, layout="mono", rate=audio.RATE)
        self.titles: list[str] = []
        self.lengths: list[int] = []
        self.pts = 0

    def _encode(self, pcm: bytes) -> None:
        import av

        for frame in formats.s16_frames(av.AudioFrame, pcm, audio.RATE, self.pts):
            self.pts += frame.samples
            for piece in self.resampler.resample(frame):
                self.output.mux(self.stream.encode(piece))

    def add(self, title: str, pcm: bytes) -> None:
        """The next chapter (s16 mono at audio.RATE), levelled and encoded."""
        self.add_leveled(title, self.level(pcm))

    def level(self, pcm: bytes) -> bytes:
        """A chapter at the book's gain (`add`'s first half: it touches nothing of the writer's,
        so one chapter may be levelled while the one before is encoded)."""
        return audio.leveled(pcm, self.gain_db, self.limit, self.target)

    def add_leveled(self, title: str, leveled: bytes) -> None:
        """The next chapter, levelled already (as long as it was), encoded."""
        if self.titles:
            self._encode(bytes(2 * round(GAP_S * audio.RATE)))
        self.titles.append(title)
        self.lengths.append(len(leveled) // 2)
        self._encode(leveled)

    def close(self) -> list[Mark]:
        """The book in place under its name; its marks."""
        for piece in self.resampler.resample(None):
            self.output.mux(self.stream.encode(piece))
        self.output.mux(self.stream.encode(None))
        self.output.close()
        chapters = marks(self.titles, self.lengths)
        if self.fmt == "m4b":
            _with_chapters(self.audio_file, self.temporary, chapters)
            self.audio_file.unlink()
        elif self.fmt == "mp3":
            tagging.mp3_chapters(self.temporary, chapters)
        else:
            tagging.ogg_chapters(self.temporary, chapters)
        tagging.add_cover(self.temporary, self.fmt, self.tags.cover, self.tags.cover_type)
        _flushed(self.temporary)
        os.replace(self.temporary, self.path)
        return chapters

    def abort(self) -> None:
        """Nothing written stays."""
        self.output.close()
        for path in {self.audio_file, self.temporary}:
            path.unlink(missing_ok=True)


def _with_chapters(source: Path, target: Path, chapters: list[Mark]) -> None:
    """The MP4 at `source` copied, packet for packet, into `target` with its chapters."""
    import av

    with av.open(str(source)) as inside:
        stream = inside.streams.audio[0]
        output: Any = av.open(str(target), "w", format="ipod")
        try:
            copied = output.add_stream_from_template(stream)
            output.metadata.update(inside.metadata)
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
            for packet in inside.demux(stream):
                if packet.dts is None:  # the demuxer's empty packet at the end
                    continue
                packet.stream = copied
                output.mux(packet)
        finally:
            output.close()


def write(
    path: Path,
    fmt: str,
    tags: Tags,
    titles: Sequence[str],
    chapter_pcm: Callable[[int], bytes],
    target: Target = DEFAULT_TARGET,
) -> list[Mark]:
    """The book at `path`: chapter i's audio is `chapter_pcm(i)` (s16 mono at audio.RATE),
    asked for twice (measured, then written at the whole book's gain). Its marks."""
    meter = audio.BookMeter(target.measure)
    for index in range(len(titles)):
        meter.feed(chapter_pcm(index))
    writer = BookWriter(path, fmt, tags, audio.gain_for(meter.result(), target), target)
    try:
        for index, title in enumerate(titles):
            writer.add(title, chapter_pcm(index))
    except BaseException:
        writer.abort()
        raise
    return writer.close()
