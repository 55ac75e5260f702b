"""Word timestamps as the supervisor publishes them (supervisor/speech/checks/word_timestamps.py): whatever times
the ASR sidecar sends, the answer holds every word of the segment once, in order, inside it."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest

from sidecar.shared.tiers import Tier
from supervisor.errors import InvalidRequest, ServerError, Unavailable
from supervisor.settings import Settings
from supervisor.speech.checks.word_timestamps import (
    item_wants_words,
    segment_words,
    tidy,
    wants_words,
)
from supervisor.speech.text.captions import Segment
from supervisor.supervision.scheduler import Scheduler


def check(words: list[Any], text: str, start: float, end: float) -> None:
    assert [w["word"] for w in words] == text.split()
    assert all(start <= w["start"] < w["end"] <= end for w in words), words
    assert all(a["end"] <= b["start"] for a, b in itertools.pairwise(words)), words


@pytest.mark.parametrize(
    "raw_times",
    [
        [
            (0.1, 0.4),
            (0.4, 0.9),
            (0.9, 1.2),
        ],  # a good answer: kept, moved to the answer's time line
        [(-3.0, 9.0), (5.0, 2.0), (1.0, 1.0)],  # out of the audio, backwards, empty
        [(0.5, 0.5), (0.5, 0.5), (0.5, 0.5)],  # all on one instant
        [(2.0, 3.0), (2.0, 3.0), (2.0, 3.0)],  # all past the segment's end
    ],
)
def test_any_sidecar_times_become_ordered_words_inside_the_segment(
    raw_times: list[tuple[float, float]],
) -> None:
    text = "Mind the gap."
    raw = [{"word": w, "start": s, "end": e} for w, (s, e) in zip(text.split(), raw_times)]
    words = tidy(raw, text, 10.0, 11.5)
    check(words, text, 10.0, 11.5)
    if raw_times[0] == (0.1, 0.4):
        assert [(w["start"], w["end"]) for w in words] == [(10.1, 10.4), (10.4, 10.9), (10.9, 11.2)]


def test_word_times_are_milliseconds() -> None:
    """Issue 49.5: a time of 1.7999999999999998 s, read off a float sum; now 1.8."""
    text = "Mind the gap."
    raw = [
        {"word": w, "start": 0.1 * k + 0.0004, "end": 0.1 * k + 0.07}
        for k, w in enumerate(text.split())
    ]
    words = tidy(raw, text, 1.7, 2.5)
    check(words, text, 1.7, 2.5)
    assert [(w["start"], w["end"]) for w in words] == [(1.7, 1.77), (1.8, 1.87), (1.9, 1.97)]
    assert all(round(t, 3) == t for w in words for t in (w["start"], w["end"]))


def test_a_tiny_segment_still_gives_each_word_a_time_of_its_own() -> None:
    text = " ".join(["word"] * 40)
    raw = [{"word": "word", "start": 0.0, "end": 0.0}] * 40
    check(tidy(raw, text, 1.0, 1.002), text, 1.0, 1.002)


def test_other_words_than_the_segments_are_never_published() -> None:
    with pytest.raises(ServerError):
        tidy([{"word": "Mind", "start": 0, "end": 1}], "Mind the gap.", 0.0, 2.0)


def test_word_granularity_needs_the_asr_sidecar_and_a_job_item_needs_captions() -> None:
    asr: Any = object()  # only its presence is read here
    assert wants_words({}, asr) is False and wants_words({"timestamp_granularities": ["word"]}, asr)
    with pytest.raises(InvalidRequest) as unavailable:
        wants_words({"timestamp_granularities": ["word"]}, None)
    assert unavailable.value.code == "word_timestamps_unavailable"
    for bad in (
        [],
        "word",
        ["words"],
        None,
        [["word"]],
        [{"a": 1}],
        [1],
        ["word", None],
    ):  # nested: no TypeError
        with pytest.raises(InvalidRequest):
            wants_words({"timestamp_granularities": bad}, asr)
    with pytest.raises(InvalidRequest) as no_captions:
        item_wants_words({"timestamp_granularities": ["word"]}, asr)
    assert no_captions.value.param == "timestamp_granularities"
    assert item_wants_words({"timestamp_granularities": ["word"], "captions": True}, asr)


def test_an_align_past_its_deadline_is_a_503_and_leaves_the_queue() -> None:
    async def scenario() -> None:
        # no sidecar takes the task: it never answers
        asr = Scheduler(Settings(engine="null").scheduling)
        segment: Segment = {"text": "Mind the gap.", "start": 0.0, "end": 1.0}
        with pytest.raises(Unavailable) as late:
            await segment_words(asr, bytes(48000), 24000, segment, "en", Tier.BULK, 0.05)
        assert late.value.retry_after_s and "no answer within" in late.value.message
        batch = asr.next_batch()
        assert batch is None and not asr.unfinished  # the timed-out task was cancelled

    asyncio.run(asyncio.wait_for(scenario(), 10))
