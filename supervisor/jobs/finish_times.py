"""When will each unfinished job be done? A small simulation of the job runner's order.

The runner serves, item by item, the job with the earliest deadline among those whose
`not_before` has come (jobs without a deadline after those with one, then in submission order),
behind every interactive request. Work is counted in estimated seconds of audio (the reference
duration rule, as admission counts it) and done at the measured throughput of the usable
sidecars. Items being generated count whole: the estimate errs late, which is the safe side for
a deadline.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sidecar.shared.duration import FRAME_RATE, target_tokens


@dataclass(frozen=True)
class PendingJob:
    """An unfinished job as the runner will serve it."""

    job_id: str
    seq: int  # submission order
    not_before: float | None
    deadline: float | None
    audio_s: float  # estimated audio of its queued and running items


def item_audio_s(text: str, speed: float | None = None, duration: float | None = None) -> float:
    """Estimated seconds of audio of one item, as the scheduler estimates it (no clone prompt)."""
    if duration:
        return float(duration)
    return target_tokens(text, speed=speed) / FRAME_RATE


def run_order(job: PendingJob) -> tuple[bool, float, int]:
    """Earliest deadline first, jobs without one last, then submission order."""
    return (job.deadline is None, job.deadline or 0.0, job.seq)


def finishes(
    jobs: list[PendingJob], now: float, rate: float, ahead_s: float = 0.0
) -> dict[str, float]:
    """Each job's estimated finish (Unix seconds), doing `rate` seconds of audio per second after
    `ahead_s` seconds of audio that goes first (interactive work). A job that becomes eligible
    later with an earlier deadline takes over from the one running, as the runner's order does."""
    t = now + ahead_s / rate
    left = {job.job_id: job.audio_s for job in jobs}
    done: dict[str, float] = {}
    while left:
        waiting = [job for job in jobs if job.job_id in left]
        eligible = [job for job in waiting if (job.not_before or 0.0) <= t]
        if not eligible:
            t = min(job.not_before or 0.0 for job in waiting)
            continue
        job = min(eligible, key=run_order)
        next_start = min(
            (job.not_before or 0.0 for job in waiting if (job.not_before or 0.0) > t),
            default=math.inf,
        )
        end = t + left[job.job_id] / rate
        if end <= next_start:
            t = end
            done[job.job_id] = t
            del left[job.job_id]
        else:  # another job may come first from next_start on
            left[job.job_id] -= (next_start - t) * rate
            t = next_start
    return done


def at_risk(deadline: float | None, finish: float | None, now: float) -> bool:
    """At risk: the estimate ends after the deadline, or (no estimate) the deadline has passed."""
    if deadline is None:
        return False
    return (finish if finish is not None else now) > deadline
