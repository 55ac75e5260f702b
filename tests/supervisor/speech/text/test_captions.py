"""Captions: each sentence its own chunk, segments timed from the chunks' audio; SRT and VTT
that real subtitle parsers (srt, webvtt-py) read back."""

from __future__ import annotations

import io

import pytest
import srt as srt_parser
import webvtt

from supervisor.errors import InvalidRequest
from supervisor.speech.text.captions import sentences, srt, vtt
from tests.helpers.synthesis_driver import RATE, drive


def test_each_sentence_is_its_own_chunk_and_segment() -> None:
    text = "Hello there. Mr. Smith came home! Did he? Yes"
    run = drive({"input": text, "seed": 1}, captions=True)
    assert run.synthesis.chunks == ["Hello there.", "Mr. Smith came home!", "Did he?", "Yes"]
    assert run.synthesis.segments == [
        {"text": c, "start": i * 2400 / RATE, "end": (i + 1) * 2400 / RATE}
        for i, c in enumerate(run.synthesis.chunks)
    ]


def test_segments_skip_the_silence_of_breaks() -> None:
    run = drive(
        {
            "input": '<speak><break time="1s"/>One. Two.<break time="500ms"/>Three.</speak>',
            "seed": 1,
        },
        captions=True,
    )
    assert [(s["text"], s["start"], s["end"]) for s in run.synthesis.segments] == [
        ("One.", 1.0, 1.1),
        ("Two.", 1.1, 1.2),
        ("Three.", 1.7, 1.8),
    ]
    assert run.synthesis.audio_s == pytest.approx(1.8)


def test_a_long_sentence_is_chunked_further_and_captioned_per_chunk() -> None:
    long = "This sentence goes on and on, " * 12 + "and ends."
    run = drive({"input": long + " Short one.", "seed": 1}, captions=True, chunk_s=2.0)
    assert len(run.synthesis.chunks) > 2 and run.synthesis.chunks[-1] == "Short one."
    assert " ".join(s["text"] for s in run.synthesis.segments[:-1]) == long


def test_duration_with_several_sentences_is_refused() -> None:
    with pytest.raises(InvalidRequest) as caught:
        drive({"input": "One. Two.", "duration": 2.0}, captions=True)
    assert caught.value.param == "duration"


def test_sentences_keep_abbreviations_and_cut_at_line_breaks() -> None:
    assert sentences("Dr. Who met J. Smith. Then\nhome! 你好。再见。") == [
        "Dr. Who met J. Smith.",
        "Then",
        "home!",
        "你好。",
        "再见。",
    ]


SEGMENTS = [
    {"text": "Hello <world> & you.", "start": 0.0, "end": 1.2345},
    {"text": "Line\n\nbreaks", "start": 3661.5, "end": 3662.0},
]


def test_srt_parses_in_the_srt_package() -> None:
    cues = list(srt_parser.parse(srt(SEGMENTS)))  # type: ignore[arg-type]
    assert [(c.index, c.start.total_seconds(), c.end.total_seconds(), c.content) for c in cues] == [
        (1, 0.0, 1.234, "Hello <world> & you."),
        (2, 3661.5, 3662.0, "Line breaks"),
    ]


def test_vtt_parses_in_webvtt_py() -> None:
    cues = webvtt.from_buffer(io.StringIO(vtt(SEGMENTS))).captions  # type: ignore[arg-type]
    assert [(c.start, c.end, c.raw_text) for c in cues] == [
        ("00:00:00.000", "00:00:01.234", "Hello &lt;world&gt; &amp; you."),
        ("01:01:01.500", "01:01:02.000", "Line breaks"),
    ]
