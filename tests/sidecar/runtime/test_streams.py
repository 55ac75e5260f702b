"""The streams' priorities. Only their order is checked here: CUDA streams need a GPU
(bench/decode_cost.py measures them there)."""

from __future__ import annotations

from sidecar.runtime import streams


def test_the_decode_goes_before_the_denoising_and_interactive_work_before_both() -> None:
    """Lower is sooner, and the denoising's default stream is at 0."""
    assert streams.HIGHEST <= streams.INTERACTIVE_DECODE_PRIORITY < streams.DECODE_STREAM_PRIORITY
    assert streams.DECODE_STREAM_PRIORITY < 0
