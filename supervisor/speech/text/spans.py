"""A request's text as spans: runs of text read with one voice, speed and language."""

from __future__ import annotations

from dataclasses import dataclass

SPEED_RANGE = (0.25, 4.0)  # the model's reading speeds: a request's `speed`, times any <prosody>


def clamp_speed(speed: float) -> float:
    """A speed within SPEED_RANGE, however rates were multiplied to reach it."""
    return min(SPEED_RANGE[1], max(SPEED_RANGE[0], speed))


@dataclass(frozen=True)
class Span:
    """Text read one way, and the silence after it. A span boundary is always a chunk boundary."""

    text: str
    voice: str | None = None  # a voice name for this span (None: the request's voice)
    speed: float = 1.0  # times the request's speed
    language: str | None = None  # None: the request's language
    pause_s: float = 0.0  # silence stitched after this span


@dataclass(frozen=True)
class Script:
    spans: tuple[Span, ...]
    lead_s: float = 0.0  # silence before the first span
