"""A request's text as spans: runs of text read with one voice, speed and language."""

from __future__ import annotations

from dataclasses import dataclass


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
