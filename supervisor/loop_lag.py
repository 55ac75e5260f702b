"""How long the event loop runs one callback without handing over: a probe that sleeps a short
while, again and again, and records how late it woke (`omnivoice_event_loop_lag_seconds`).

Every HTTP request, stream and sidecar frame of the supervisor is served by one event loop, so
work that holds it (a large job stored in one go, a result encoded inline) delays them all; the
probe shows it in /metrics, beside the requests it delayed.
"""

from __future__ import annotations

import asyncio
import contextlib

from supervisor import metrics

INTERVAL_S = 0.01


class LagProbe:
    """The probe's task, started and stopped with the server."""

    def __init__(self, interval_s: float = INTERVAL_S) -> None:
        self.interval_s = interval_s
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self.run(), name="event-loop-lag")

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + self.interval_s
            await asyncio.sleep(self.interval_s)
            metrics.event_loop_lag.observe(max(0.0, loop.time() - due))

    async def stop(self) -> None:
        if self.task is None:
            return
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
        self.task = None
