"""sidecar/serve/main.py's process settings."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from sidecar.serve import main


@pytest.fixture
def switch_interval() -> Iterator[None]:
    before = sys.getswitchinterval()
    yield
    sys.setswitchinterval(before)


@pytest.mark.usefixtures("switch_interval")
def test_the_gil_is_handed_over_well_within_a_small_batch_step() -> None:
    """A small batch's denoising step takes 2-5 ms on the device and dozens of torch calls on the
    host, each of which lets the GIL go: a thread running Python must hand it back far sooner than
    Python's default 5 ms, or the device waits for the frame loop."""
    sys.setswitchinterval(0.005)
    main.share_the_gil()
    assert sys.getswitchinterval() == pytest.approx(main.GIL_SWITCH_INTERVAL_S)
    assert main.GIL_SWITCH_INTERVAL_S <= 0.001
