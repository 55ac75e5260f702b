"""sidecar/serve/load_timer.py: the start's stages, timed from the frames a sidecar sends."""

from __future__ import annotations

import logging
import re

import pytest

from sidecar.serve.load_timer import START_PREFIX, LoadTimer
from tests.helpers.harness import fast_settings, run, running_pool


def test_each_stage_lasts_until_the_next_one_and_repeats_are_one_stage() -> None:
    timer = LoadTimer(started=100.0)
    frames = [
        ({"op": "progress", "stage": "start"}, 101.5),
        ({"op": "progress", "stage": "model"}, 101.75),
        ({"op": "progress", "stage": "warmup"}, 104.0),
        ({"op": "progress", "stage": "warmup"}, 104.5),  # one a step: still the warm-up
        ({"op": "step", "batch": 0, "step": 1, "of": 2}, 104.6),
    ]
    assert all(timer.observe(frame, now) is None for frame, now in frames)
    line = timer.observe({"op": "ready"}, 105.0)
    assert line == (
        f"{START_PREFIX} exec to first stage 1.50 s, start 0.25 s, model 2.25 s, warmup 1.00 s; "
        "ready 5.00 s after exec"
    )
    assert timer.observe({"op": "ready"}, 106.0) is None  # said once


def test_a_real_sidecar_logs_its_start_stages(caplog: pytest.LogCaptureFixture) -> None:
    async def start() -> None:
        async with running_pool(fast_settings(None)):
            pass

    with caplog.at_level(logging.INFO, logger="omnivoice"):
        run(start())
    [line] = [r.getMessage() for r in caplog.records if START_PREFIX in r.getMessage()]
    assert re.search(
        r"start stages: exec to first stage \d+\.\d\d s, start \d+\.\d\d s, "
        r"null engine \d+\.\d\d s, warmup \d+\.\d\d s; ready \d+\.\d\d s after exec$",
        line,
    ), line


def test_a_spare_says_how_long_it_took_from_go() -> None:
    timer = LoadTimer(started=0.0)
    for stage, now in (("start", 0.5), ("import", 0.5), ("parked", 20.0), ("model", 80.0)):
        timer.observe({"op": "progress", "stage": stage}, now)
    line = timer.observe({"op": "ready"}, 83.0)
    assert line is not None and line.endswith(
        "parked 60.00 s, model 3.00 s; ready 83.00 s after exec, 3.00 s after go"
    )
