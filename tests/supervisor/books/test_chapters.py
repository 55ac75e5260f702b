"""A chapter's parts joined: their audio into one FLAC, their captions moved on by each part's
audio, read back by the real SRT and WebVTT parsers."""

from __future__ import annotations

import io

import srt
import webvtt

from supervisor.books import audio, chapters
from supervisor.speech.audio import formats
from supervisor.speech.text import captions
from supervisor.speech.text.captions import Segment


def part_captions(texts: list[tuple[float, float, str]]) -> tuple[str, str]:
    segments = [Segment(text=text, start=start, end=end) for start, end, text in texts]
    return captions.srt(segments), captions.vtt(segments)


def test_captions_of_parts_are_one_file_with_each_part_moved_on() -> None:
    first = part_captions([(0.1, 1.2, "The boats came in."), (1.3, 2.0, "Gulls followed.")])
    second = part_captions([(0.1, 0.9, "The nets were full.")])
    joined_srt = chapters.joined_captions([first[0], second[0]], [2.5, 1.0], "srt")
    cues = list(srt.parse(joined_srt))
    assert [c.index for c in cues] == [1, 2, 3]
    assert [c.content for c in cues] == [
        "The boats came in.",
        "Gulls followed.",
        "The nets were full.",
    ]
    assert cues[2].start.total_seconds() == 2.6 and cues[2].end.total_seconds() == 3.4
    joined_vtt = chapters.joined_captions([first[1], second[1]], [2.5, 1.0], "vtt")
    assert joined_vtt.count("WEBVTT") == 1
    read = webvtt.from_buffer(io.StringIO(joined_vtt))
    assert [(c.start, c.text) for c in read][2] == ("00:00:02.600", "The nets were full.")


def test_audio_of_parts_is_one_flac_as_long_as_they_are() -> None:
    one, two = bytes(2 * 24000), b"\x10\x00" * 12000
    joined = chapters.joined_audio([formats.encode("flac", one), formats.encode("wav", two)])
    assert joined[:4] == b"fLaC"
    assert audio.decoded(joined) == one + two
