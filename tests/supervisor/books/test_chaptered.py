"""The chaptered file of each format read back with PyAV (chapters, their starts against each
chapter's audio length, tags) and mutagen (the cover), and its loudness set over the whole book."""

from __future__ import annotations

import math
import struct
from pathlib import Path

import av
import pytest
from mutagen import File as MutagenFile

from supervisor.books import audio, chaptered
from supervisor.books.chaptered import Tags
from supervisor.speech.audio import loudness
from tests.helpers.books import png

RATE = audio.RATE
TITLES = ("1 Part One — 1.1 The Harbour", "1.2 The Market", "2 The Storm")
SECONDS = (1.5, 2.25, 1.0)
AMPLITUDES = (3000, 12000, 6000)  # chapters of different levels: one gain must serve them all


def tone(seconds: float, amplitude: int, hz: float = 330.0) -> bytes:
    n = round(seconds * RATE)
    return b"".join(
        struct.pack("<h", round(amplitude * math.sin(2 * math.pi * hz * i / RATE)))
        for i in range(n)
    )


CHAPTER_PCM = [tone(s, a) for s, a in zip(SECONDS, AMPLITUDES, strict=True)]
TAGS = Tags("Harbour Days", "A. Writer", "en", png(4, 4), "image/png")


def chapters_of(path: Path) -> list[tuple[float, float, str]]:
    with av.open(str(path)) as book:
        return sorted(
            (
                float(c["start"] * c["time_base"]),
                float(c["end"] * c["time_base"]),
                c["metadata"]["title"],
            )
            for c in book.chapters()
        )  # libavformat lists ID3 chapters last first


@pytest.mark.parametrize("fmt", chaptered.BOOK_FORMATS)
def test_each_format_has_its_chapters_tags_and_cover(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / f"book.{fmt}"
    asked: list[int] = []

    def chapter(index: int) -> bytes:
        asked.append(index)
        return CHAPTER_PCM[index]

    marks = chaptered.write(path, fmt, TAGS, TITLES, chapter)
    assert asked == [0, 1, 2, 0, 1, 2]  # measured, then written
    found = chapters_of(path)
    assert [title for _, _, title in found] == list(TITLES)
    expected_start = 0.0
    for (start, end, _), seconds, mark in zip(found, SECONDS, marks, strict=True):
        assert start == pytest.approx(expected_start, abs=0.002)
        assert mark.audio_s == pytest.approx(seconds)
        expected_start += seconds + chaptered.GAP_S
        # the last mark ends with the stream, which Opus rounds up to its 20 ms frames
        last = expected_start > sum(SECONDS) + 2 * chaptered.GAP_S
        assert end == pytest.approx(
            expected_start - (chaptered.GAP_S if last else 0), abs=0.03 if last else 0.002
        )
    with av.open(str(path)) as book:
        stream = book.streams.audio[0]
        tags = {**book.metadata, **stream.metadata}
        duration = float(book.duration or 0) / av.time_base
        assert stream.codec_context.codec.id == av.Codec(chaptered.CODECS[fmt][1], "w").id
    assert tags["title"] == "Harbour Days" and tags["artist"] == "A. Writer"
    assert duration == pytest.approx(sum(SECONDS) + 2 * chaptered.GAP_S, abs=0.1)
    tagged = MutagenFile(path)
    if fmt == "m4b":
        covers = [bytes(c) for c in tagged.tags["covr"]]
    elif fmt == "mp3":
        covers = [f.data for f in tagged.tags.getall("APIC")]
        assert len(tagged.tags.getall("CHAP")) == 3 and len(tagged.tags.getall("CTOC")) == 1
    else:
        import base64

        from mutagen.flac import Picture

        covers = [Picture(base64.b64decode(v)).data for v in tagged.tags["metadata_block_picture"]]
    assert covers == [png(4, 4)]


def test_the_whole_book_is_levelled_with_one_gain(tmp_path: Path) -> None:
    """The loud chapter stays louder than the quiet one (one gain, not one per chapter), and the
    book as a whole lands on the target."""
    path = tmp_path / "book.mp3"
    target = loudness.Target(-20.0, -1.0)
    chaptered.write(path, "mp3", TAGS, TITLES, lambda i: CHAPTER_PCM[i], target)
    pcm = audio.decoded(path.read_bytes())
    level = loudness.measure(pcm, RATE, "lufs").level
    assert level == pytest.approx(-20.0, abs=1.0)
    gap = round(chaptered.GAP_S * RATE)
    quiet = pcm[: round(1.5 * RATE) * 2]
    loud_start = (round(1.5 * RATE) + gap) * 2
    loud = pcm[loud_start : loud_start + round(2.25 * RATE) * 2]
    difference = (
        loudness.measure(loud, RATE, "lufs").level - loudness.measure(quiet, RATE, "lufs").level
    )
    assert difference == pytest.approx(20 * math.log10(12000 / 3000), abs=1.0)
