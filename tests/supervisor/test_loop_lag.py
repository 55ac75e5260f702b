"""supervisor/loop_lag.py: the probe records how long the event loop ran something else.

A real event loop: a callback that holds it (a blocking sleep, as work done inline on the loop
would) must show as a lag at least that long in `omnivoice_event_loop_lag_seconds`; the
probe's task ends with `stop`.
"""

from __future__ import annotations

import asyncio
import time

from supervisor import metrics
from supervisor.loop_lag import LagProbe
from tests.helpers.waits import async_wait_until

HELD_S = 0.3
BOUND_S = 30.0


def counts() -> tuple[float, float]:
    """(samples, samples of at most 0.25 s) so far."""
    total = at_most = 0.0
    for family in metrics.event_loop_lag.collect():
        for sample in family.samples:
            if sample.name.endswith("_count"):
                total = sample.value
            elif sample.name.endswith("_bucket") and sample.labels["le"] == "0.25":
                at_most = sample.value
    return total, at_most


async def held_loop() -> tuple[float, float]:
    probe = LagProbe()
    probe.start()
    before = counts()
    await async_wait_until(lambda: counts()[0] > before[0], BOUND_S, "the probe's first sample")
    asyncio.get_running_loop().call_soon(time.sleep, HELD_S)  # holds the loop
    seen = counts()
    await async_wait_until(
        lambda: counts()[0] >= seen[0] + 2, BOUND_S, "the probe to wake after the hold"
    )
    await probe.stop()
    assert probe.task is None
    after = counts()
    return after[0] - before[0], after[1] - before[1]


def test_a_callback_that_holds_the_loop_shows_as_lag() -> None:
    samples, short = asyncio.run(held_loop())
    assert samples > short  # at least one sample over 0.25 s: the hold


def test_stop_before_start_does_nothing() -> None:
    asyncio.run(LagProbe().stop())
