"""Which queued tasks make the next batch: taken in queue order up to a size cap and a token budget.

The scheduler owns the queues and hands batches out; these rules only choose. A task that does
not fit the budget is skipped for a smaller one behind it. A task the poison rule isolated
(`alone`), or one that is not a generation (a voice to encode, audio to transcribe), goes in a
batch of its own.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sidecar.shared.protocol import Tier
from supervisor.settings import SchedulingSettings
from supervisor.supervision.work import Generation, Task


@dataclass(frozen=True)
class Packed:
    tasks: list[Task]
    full: bool  # nothing more fits (the cap, the budget), or it is a batch of one by its nature


def pack(
    queued: Iterable[Task], settings: SchedulingSettings, *, ahead: bool, bulk_only: bool
) -> Packed:
    """The next batch's tasks. `ahead`: for a busy sidecar, so no isolated task (it waits for
    an idle one, so that nothing else runs in the process its kill may be blamed on);
    `bulk_only`: no interactive task (they join instead)."""
    chosen: list[Task] = []
    tokens = 0
    full = False
    for task in queued:
        if (ahead and task.alone) or (bulk_only and task.tier is Tier.INTERACTIVE):
            continue
        if not chosen and (task.alone or not isinstance(task, Generation)):
            return Packed([task], True)
        if task.alone or not isinstance(task, Generation):
            continue
        if len(chosen) >= settings.max_batch_size:
            return Packed(chosen, True)
        if chosen and tokens + task.est_tokens > settings.max_batch_tokens:
            full = True
            continue
        chosen.append(task)
        tokens += task.est_tokens
    return Packed(chosen, full or len(chosen) >= settings.max_batch_size)


def pack_join(
    queued: Iterable[Task], settings: SchedulingSettings, max_tokens: int | None
) -> list[Task]:
    """The interactive generation tasks at the head of the queue, as a batch that joins a
    sidecar's running batch: at most `max_tokens` estimated tokens if given (none, if the first
    task would pass them), and the cap and budget of any batch."""
    chosen: list[Task] = []
    tokens = 0
    for task in queued:
        if task.tier is not Tier.INTERACTIVE:
            break  # the queues are read interactive first
        if task.alone or task.kind != "generate":
            continue
        if max_tokens is not None and tokens + task.est_tokens > max_tokens:
            break
        if len(chosen) >= settings.max_batch_size or (
            chosen and tokens + task.est_tokens > settings.max_batch_tokens
        ):
            break
        chosen.append(task)
        tokens += task.est_tokens
    return chosen
