"""Each unfinished job's estimated finish and whether its deadline is at risk.

The job runner refreshes this once a second (and the jobs route after a new job): the store's
backlog of unfinished jobs, the interactive audio waiting ahead of them, and the measured
throughput of the usable sidecars go into `finish_times.finishes`, starting once a sidecar can take
work (with every sidecar reaped: after the time the last start took). Until a batch has been
measured there is no throughput, so no estimate: `estimated_finish` is null and a deadline counts
as at risk only once it has passed. /metrics reads the count at risk and the tightest slack
from here.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from sidecar.shared.tiers import Tier
from supervisor.jobs.finish_times import at_risk, finishes
from supervisor.jobs.schedule import rfc3339
from supervisor.jobs.storage import JobStorage
from supervisor.jobs.views import JobView
from supervisor.supervision.scheduler import Scheduler

ENDED = ("completed", "failed", "cancelled")  # job states


@dataclass
class FinishEstimates:
    store: JobStorage
    scheduler: Scheduler
    startup_s: Callable[[], float]  # until a sidecar can take work (0: one is running)
    finish: dict[str, float] = field(default_factory=dict)  # by job id; estimated ones only
    deadline: dict[str, float] = field(default_factory=dict)  # unfinished jobs with one
    not_before: dict[str, float] = field(default_factory=dict)  # unfinished jobs with one
    refreshed_at: float = 0.0  # time.monotonic() of the last refresh

    def rate(self) -> float | None:
        """Seconds of audio the usable sidecars make per second, once measured."""
        measured = self.scheduler.throughput
        return measured * self.scheduler.capacity if measured and self.scheduler.capacity else None

    async def refresh(self) -> None:
        backlog = await asyncio.to_thread(self.store.backlog)
        rate = self.rate()
        interactive = sum(
            task.est_audio_s for task in self.scheduler.queues[Tier.INTERACTIVE] if not task.done
        )
        # With every sidecar reaped, nothing is made before one has started again.
        start = time.time() + self.startup_s()
        self.finish = finishes(backlog, start, rate, interactive) if rate else {}
        self.deadline = {job.job_id: job.deadline for job in backlog if job.deadline is not None}
        self.not_before = {
            job.job_id: job.not_before for job in backlog if job.not_before is not None
        }
        self.refreshed_at = time.monotonic()

    def annotate(self, job: JobView) -> JobView:
        """The job object with `estimated_finish` (RFC 3339 or null) and `deadline_at_risk`."""
        job_id = job["id"]
        if job["state"] in ENDED:  # the cache may not know yet
            job["estimated_finish"], job["deadline_at_risk"] = None, False
            return job
        finish = self.finish.get(job_id)
        job["estimated_finish"] = rfc3339(finish)
        job["deadline_at_risk"] = at_risk(self.deadline.get(job_id), finish, time.time())
        return job

    def summary(self) -> tuple[int, float | None]:
        """(jobs whose deadline is at risk, the seconds of slack of the tightest or None)."""
        now = time.time()
        slack = {
            job_id: deadline - self.finish.get(job_id, now)
            for job_id, deadline in self.deadline.items()
        }
        return sum(1 for s in slack.values() if s < 0), min(slack.values(), default=None)
