"""Fair shares between owners (API keys) inside a tier: the order the scheduler reads its queues in.

Tiers come first: every interactive task goes before any bulk one (`Tier`). Inside a tier the
owners take turns by the audio they have been served, not by arrival: each owner counts the
estimated seconds of audio of its tasks handed to sidecars, and its queued tasks, in its own
order, start where its count leaves off. The tasks go least-served first (ties: the order they
came). So one owner's queue, however long, holds another owner's request back by at most one
task of its own, at most one batch: a key with hours of audio queued and a key with one
sentence are served in turn, and a key of short requests gets as much audio as a key of long
ones.

An owner with nothing queued in a tier starts level with the least-served owner that has work
queued there (it gets no credit for having been away), and once a tier's queue is empty every
count of it starts again from nothing. Tasks of no owner (the ASR sidecar's, a voice to encode)
share one owner, "".
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator

from sidecar.shared.tiers import Tier
from supervisor.supervision.work import Task


class FairShares:
    def __init__(self) -> None:
        self.served: dict[Tier, dict[str, float]] = {tier: {} for tier in Tier}

    def arrive(self, task: Task, queue: Iterable[Task]) -> None:
        """`task` is about to join its tier's `queue`."""
        served = self.served[task.tier]
        waiting = {t.owner for t in queue if not t.done}
        if not waiting:
            served.clear()
        elif task.owner not in waiting:
            level = min(served.get(owner, 0.0) for owner in waiting)
            served[task.owner] = max(served.get(task.owner, 0.0), level)

    def take(self, task: Task) -> None:
        """`task` leaves the queue for a sidecar: its audio counts to its owner."""
        served = self.served[task.tier]
        served[task.owner] = served.get(task.owner, 0.0) + task.est_audio_s

    def order(self, tier: Tier, queue: Iterable[Task]) -> list[Task]:
        """A tier's queued tasks in the order they are served."""
        served = self.served[tier]
        start: dict[str, float] = {}  # where each owner's next task starts
        keyed = []
        for index, task in enumerate(queue):
            at = start.get(task.owner, served.get(task.owner, 0.0))
            keyed.append((at, index, task))
            start[task.owner] = at + task.est_audio_s
        return [task for _, _, task in sorted(keyed, key=lambda k: (k[0], k[1]))]

    def queued(self, queues: dict[Tier, deque[Task]]) -> Iterator[Task]:
        """Every task waiting, tier by tier, each tier in its fair order; a task that ended while
        it waited (its cancellation not yet settled) leaves its queue instead."""
        for tier in Tier:
            queue = queues[tier]
            for task in self.order(tier, queue):
                if task.done:
                    queue.remove(task)
                else:
                    yield task
