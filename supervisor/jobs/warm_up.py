"""A sidecar kept ready for the next scheduled job, and how that warm-up goes.

A sidecar is started this many times its measured time to ready, plus `WARM_EXTRA_S`, before a
job's `not_before`, and kept until `WARM_AFTER_S` after it (then idle reaping applies as ever).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TypedDict

from supervisor.jobs.storage import JobStorage
from supervisor.jobs.views import JobView
from supervisor.services import Services

log = logging.getLogger("omnivoice.jobs")

WARM_MARGIN = 1.5
WARM_EXTRA_S = 10.0
WARM_AFTER_S = 5.0
UNMEASURED_READY_S = 120.0  # no sidecar ever ready yet: DESIGN's load deadline
WARM_STATES = ("ready", "busy", "starting", "stopping", "backoff", "reaped", "failed")  # best first


class WarmUpReport(TypedDict):
    state: str  # the best of WARM_STATES (busy shown as ready)
    restarts: int
    last_error: str | None


class WarmUp:
    def __init__(self, svc: Services, store: JobStorage) -> None:
        self.svc = svc
        self.store = store
        self.warming_for: float | None = None  # the not_before a warm-up was last asked for

    def startup_s(self) -> float:
        """How long until a sidecar can take work: 0 with one running, else its last start time."""
        if any(s["state"] in ("ready", "busy") for s in self.svc.pool.health()["sidecars"]):
            return 0.0
        return self.svc.pool.time_to_ready_s or UNMEASURED_READY_S

    def report(self) -> WarmUpReport:
        """The sidecars as a job waiting for its not_before sees them: the best state of any
        (ready, starting, backoff, reaped, failed), their restarts, and the last error."""
        sidecars = self.svc.pool.health()["sidecars"]
        states = {s["state"] for s in sidecars}
        best = next((state for state in WARM_STATES if state in states), "failed")
        return {
            "state": "ready" if best == "busy" else best,
            "restarts": sum(s["restarts"] for s in sidecars),
            "last_error": next((s["last_error"] for s in sidecars if s["last_error"]), None),
        }

    def warming(self, job: JobView, not_before: float | None) -> bool:
        """Whether the warm-up under way is for this queued job."""
        return (
            job["state"] == "queued"
            and not_before is not None
            and not_before == self.warming_for
            and time.time() < not_before
        )

    async def keep_ready(self) -> None:
        """Have a sidecar ready at the next job's not_before: a reaped one is started ahead of
        it by the time the last start took, with a margin."""
        now = time.time()
        start = await asyncio.to_thread(self.store.next_start, now)
        if start is None:
            return
        pool = self.svc.pool
        ready_s = pool.time_to_ready_s or UNMEASURED_READY_S
        if start - now > ready_s * WARM_MARGIN + WARM_EXTRA_S:
            return
        pool.warm_up(time.monotonic() + start - now + WARM_AFTER_S)
        if self.warming_for != start:
            self.warming_for = start
            log.info(
                "jobs: a job may start in %.0f s: keeping a sidecar ready for it (its last "
                "start took %.1f s)",
                start - now,
                ready_s,
            )
