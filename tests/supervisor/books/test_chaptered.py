"""The chaptered file of each format read back with PyAV (chapters, each starting where its
audio does in the decoded book, the seams between segments silent, tags) and mutagen (the
cover), and its loudness set over the whole book."""

from __future__ import annotations

import math
import struct
from pathlib import Path

import av
import numpy as np
import pytest
from mutagen import File as MutagenFile

from supervisor.books import audio, chaptered
from supervisor.books.chaptered import Chapters, Tags
from supervisor.speech.audio import loudness
from tests.helpers.books import png

RATE = audio.RATE
TITLES = ("1 Part One — 1.1 The Harbour", "1.2 The Market", "2 The Storm")
# each chapter's items: (seconds, amplitude); chapters of different levels (one gain must serve
# them all), the first and the last in several items (segments meet inside a chapter too)
ITEMS = (((1.5, 3000), (0.7, 4000)), ((2.25, 12000),), ((0.6, 6000), (0.4, 6000), (0.3, 5000)))


def tone(seconds: float, amplitude: int, hz: float = 330.0) -> bytes:
    n = round(seconds * RATE)
    return b"".join(
        struct.pack("<h", round(amplitude * math.sin(2 * math.pi * hz * i / RATE)))
        for i in range(n)
    )


CHAPTER_PARTS = [[tone(s, a) for s, a in chapter] for chapter in ITEMS]
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


def sounding(pcm: bytes) -> list[tuple[float, float]]:
    """The stretches (start, end in seconds) where the decoded book is not silent, to 1 ms: each
    item's tone, unless a seam clicked or an item landed elsewhere."""
    window = RATE // 1000
    samples = np.abs(np.frombuffer(pcm, "<i2").astype(np.int32))
    loud = samples[: len(samples) // window * window].reshape(-1, window).max(axis=1)
    on = loud > 0.05 * loud.max()
    edges = np.flatnonzero(np.diff(np.concatenate(([0], on.astype(np.int8), [0]))))
    return [(start / 1000, end / 1000) for start, end in zip(edges[::2], edges[1::2], strict=True)]


@pytest.mark.parametrize("fmt", chaptered.BOOK_FORMATS)
def test_each_format_has_its_chapters_tags_and_cover(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / f"book.{fmt}"
    asked: list[int] = []

    def parts(index: int) -> list[bytes]:
        asked.append(index)
        return CHAPTER_PARTS[index]

    marks = chaptered.write(path, fmt, TAGS, Chapters(TITLES, parts), threads=2)
    assert asked == [0, 1, 2, 0, 1, 2]  # measured, then written
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # no segment left
    found = chapters_of(path)
    assert [title for _, _, title in found] == list(TITLES)
    for (start, end, _), mark, items in zip(found, marks, ITEMS, strict=True):
        assert start == pytest.approx(mark.start_s, abs=0.001)
        # the last mark ends with the stream, which Opus rounds up to its 20 ms frames
        assert end == pytest.approx(mark.end_s, abs=0.03 if mark is marks[-1] else 0.001)
        assert mark.audio_s == pytest.approx(sum(seconds for seconds, _ in items))
    # every item sounds once, as long as it is, where its chapter's mark says; between two
    # items a seam's silence, between two chapters the gap and a seam's
    heard = sounding(audio.decoded(path.read_bytes()))
    assert len(heard) == sum(len(items) for items in ITEMS)
    at = 0
    for mark, items in zip(marks, ITEMS, strict=True):
        assert heard[at][0] == pytest.approx(mark.start_s, abs=0.003)
        for number, (seconds, _) in enumerate(items):
            start, end = heard[at + number]
            assert end - start == pytest.approx(seconds, abs=0.004)
            if number + 1 < len(items):
                assert 0 < heard[at + number + 1][0] - end < chaptered.SEAM_MAX_S
        at += len(items)
        if at < len(heard):
            silence = heard[at][0] - heard[at - 1][1]
            assert chaptered.GAP_S < silence < chaptered.GAP_S + chaptered.SEAM_MAX_S
    with av.open(str(path)) as book:
        stream = book.streams.audio[0]
        tags = {**book.metadata, **stream.metadata}
        duration = float(book.duration or 0) / av.time_base
        assert stream.codec_context.codec.id == av.Codec(chaptered.CODECS[fmt][1], "w").id
    assert tags["title"] == "Harbour Days" and tags["artist"] == "A. Writer"
    # the stream ends with the last item (Opus rounds up to its 20 ms frames)
    assert duration == pytest.approx(marks[-1].end_s, abs=0.03)
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
    marks = chaptered.write(path, "mp3", TAGS, Chapters(TITLES, lambda i: CHAPTER_PARTS[i]), target)
    pcm = audio.decoded(path.read_bytes())
    level = loudness.measure(pcm, RATE, "lufs").level
    assert level == pytest.approx(-20.0, abs=1.0)
    quiet = pcm[: round(1.5 * RATE) * 2]
    loud_start = round(marks[1].start_s * RATE) * 2
    loud = pcm[loud_start : loud_start + round(2.25 * RATE) * 2]
    difference = (
        loudness.measure(loud, RATE, "lufs").level - loudness.measure(quiet, RATE, "lufs").level
    )
    assert difference == pytest.approx(20 * math.log10(12000 / 3000), abs=1.0)
