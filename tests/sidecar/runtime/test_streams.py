"""The decode's and the denoising's streams by `RuntimeOptions.decode_priority`. Only their
choice runs here: CUDA streams need a GPU (bench/decode_cost.py measures them there)."""

from __future__ import annotations

import pytest
import torch

from sidecar.runtime import streams
from sidecar.runtime.options import DECODE_PRIORITIES, RuntimeOptions


def test_the_decode_goes_first_by_default() -> None:
    """Lower is sooner, and the denoising's default stream is at 0: by default the decode is
    above it, `equal` beside it, and `below` leaves the decode at 0 under a denoising stream of
    the highest priority, which the interactive decode shares."""
    assert RuntimeOptions().decode_priority == "above"
    assert streams.decode_priority("above") < 0 == streams.decode_priority("equal")
    assert streams.decode_priority("below") == 0
    assert streams.HIGHEST <= streams.INTERACTIVE_DECODE_PRIORITY < streams.decode_priority("above")


@pytest.mark.parametrize("choice", DECODE_PRIORITIES)
def test_no_stream_of_its_own_off_a_gpu(choice: str) -> None:
    assert streams.denoising_stream(torch.device("cpu"), choice) is None
    streams.enter(None)  # nothing to enter: the CPU, or the default stream on a GPU
