"""The player's account of a stream (bench/stream_timing.py) on made-up arrivals: first audio,
the wait of a player that starts then, raw pcm and SSE events split anywhere."""

from __future__ import annotations

import base64
import json

import pytest

from bench.stream_timing import PCM_BYTES_PER_SECOND, StreamClock

ONE_S = PCM_BYTES_PER_SECOND  # one second of the harness's pcm


def sse(payload: dict[str, object]) -> bytes:
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def delta(seconds: float) -> bytes:
    audio = base64.b64encode(bytes(int(seconds * ONE_S))).decode()
    return sse({"type": "speech.audio.delta", "audio": audio})


def test_pieces_in_time_never_make_the_player_wait() -> None:
    clock = StreamClock("audio", start=0.0)
    clock.feed(bytes(ONE_S), now=0.2)  # 1 s of audio at 0.2 s
    clock.feed(bytes(ONE_S), now=1.1)  # needed at 1.2 s: early
    clock.feed(bytes(ONE_S), now=2.2)  # needed at 2.2 s: just in time
    assert clock.first_audio_s == pytest.approx(0.2)
    assert clock.audio_s == pytest.approx(3.0)
    assert clock.underrun_s == 0.0


def test_the_wait_is_the_largest_lateness_not_the_sum() -> None:
    clock = StreamClock("audio", start=0.0)
    clock.feed(bytes(ONE_S), now=1.0)
    clock.feed(bytes(ONE_S), now=2.5)  # needed at 2.0: the player waits 0.5 s
    clock.feed(bytes(ONE_S), now=3.8)  # needed at 3.0, or 3.5 after the first wait: 0.3 s more
    clock.feed(bytes(ONE_S), now=4.0)  # early
    assert clock.first_audio_s == pytest.approx(1.0)
    assert clock.underrun_s == pytest.approx(0.8)


def test_sse_events_split_across_reads_count_their_audio_once() -> None:
    stream = delta(0.5) + delta(0.5) + sse({"type": "speech.audio.done", "usage": {}})
    clock = StreamClock("sse", start=0.0)
    for i, at in zip(range(0, len(stream), 7), range(10**6)):
        clock.feed(stream[i : i + 7], now=0.1 + at * 1e-4)
    assert clock.audio_s == pytest.approx(1.0)
    assert clock.first_audio_s is not None and clock.first_audio_s > 0.1
    assert not clock.error


def test_an_sse_error_event_is_noted_and_carries_no_audio() -> None:
    clock = StreamClock("sse", start=0.0)
    clock.feed(delta(1.0), now=0.3)
    clock.feed(sse({"type": "error", "error": {"message": "lost"}}), now=5.0)
    assert clock.error
    assert clock.audio_s == pytest.approx(1.0)
    assert clock.underrun_s == 0.0
