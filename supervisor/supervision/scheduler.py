"""Admission, batching, and what happens to the tasks of a killed batch. Never touches a process.

A request becomes tasks (one per chunk of its text). Admission is a bounded queue measured in
seconds of estimated audio: a request is admitted while the queue is below the limit (so a long
one is not starved by short ones), and refused once it is full with Overloaded and a Retry-After
computed from measured throughput. A request whose later chunks can only be submitted once an
earlier one is done (continuity prompts) reserves its whole estimate up front, so it is admitted
or refused once, and counts as unfinished work (for the drain) until it lets go. Interactive
tasks go before bulk ones, and inside a tier owners take turns (`fair_share`). The pool asks
`next_batch` for work whenever a sidecar can take some: tasks are packed up to a batch-size cap
and a token budget; when the sidecar is busy, a batch is only handed out ahead of time once it
is full, or once its oldest task has waited `max_batch_latency_ms` (it then waits in the
sidecar's pipe, not in ours).

No lost requests. When a sidecar dies, the tasks of the batch it was running go back to the
front of the queue, each marked with the kill. A task marked twice runs alone; if it then
kills a sidecar alone it fails with PoisonRequest and is never retried. "Alone" means alone in
the sidecar too: such a task is never sent ahead, and the pool sends nothing behind it. Batches
that were only queued in the dead sidecar's pipe go back unmarked.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import time
from collections import deque
from collections.abc import Callable, Iterator

from sidecar.shared.protocol import (
    Aligned,
    AsrAudio,
    Encoded,
    Item,
    Result,
    Tier,
    Transcript,
    VoiceToEncode,
)
from supervisor import metrics
from supervisor.errors import Overloaded, PoisonRequest, ServerError, Unavailable
from supervisor.pool_health import QueueDepth
from supervisor.settings import SchedulingSettings
from supervisor.supervision import batching
from supervisor.supervision.admission import MAX_RETRY_AFTER_S, OwnerShares, Reservation
from supervisor.supervision.fair_share import FairShares
from supervisor.supervision.work import (
    Alignment,
    Answer,
    Batch,
    Encoding,
    Generation,
    Task,
    Transcription,
    estimate,
)

THROUGHPUT_SMOOTHING = 0.3
UNMEASURED_THROUGHPUT = 1.0  # seconds of audio per second per sidecar, until measured


def counted(task: Task) -> str | None:
    """The owner a task's audio counts against (`admission.OwnerShares`): interactive work's."""
    return task.owner if task.tier is Tier.INTERACTIVE else None


class Scheduler:
    def __init__(
        self, settings: SchedulingSettings, wake: Callable[[], None] = lambda: None
    ) -> None:
        self.settings = settings
        self.wake = wake
        self.queues: dict[Tier, deque[Task]] = {tier: deque() for tier in Tier}
        self.shares = FairShares()  # the order inside a tier: owners in turn
        self.owners = OwnerShares(settings.max_queue_share_per_key, keyed=settings.several_owners)
        self.unfinished: set[Task] = set()
        self.admitted_audio_s = 0.0
        self.capacity = 1  # usable sidecars; the pool keeps this current
        self.throughput: float | None = None  # audio seconds per wall second, per sidecar
        self.closed: ServerError | None = None
        self.reservations: set[Reservation] = set()
        self._batch_ids = itertools.count(1)
        self._task_ids = itertools.count(1)
        self._idle = asyncio.Event()
        self._idle.set()

    # ------------------------------------------------------------ admission

    def submit(
        self,
        items: list[Item],
        tier: Tier = Tier.INTERACTIVE,
        reservation: Reservation | None = None,
        owner: str = "",
    ) -> list[asyncio.Future[Result]]:
        """Admit generation items; their futures resolve to `result` messages or raise ServerError.

        With a reservation the items were admitted when it was made: no check, even while draining.
        """
        tasks: list[Task] = []
        futures: list[asyncio.Future[Result]] = []
        for item in items:
            audio_s, tokens = estimate(item)
            task = Generation(
                id=item["id"],
                payload=item.copy(),
                tier=tier,
                est_audio_s=audio_s,
                est_tokens=tokens,
                owner=owner,
            )
            tasks.append(task)
            futures.append(task.future)
        self.admit(tasks, reservation)
        return futures

    def reserve(self, audio_s: float, owner: str | None = None) -> Reservation:
        """Admit audio_s seconds for tasks to be submitted later, or raise as `admit` would;
        `owner`: whose interactive request it is (None: not counted, as bulk work)."""
        self.check_admission(owner)
        reservation = Reservation(audio_s, owner, self._release)
        self.reservations.add(reservation)
        self.admitted_audio_s += audio_s
        self.owners.add(owner, audio_s)
        self._idle.clear()
        return reservation

    def _release(self, reservation: Reservation) -> None:
        self.reservations.discard(reservation)
        self.admitted_audio_s = max(0.0, self.admitted_audio_s - reservation.remaining_s)
        self.owners.remove(reservation.owner, reservation.remaining_s)
        reservation.remaining_s = 0.0
        self._set_idle_if_done()

    def _set_idle_if_done(self) -> None:
        if not self.unfinished and not self.reservations:
            self.admitted_audio_s = 0.0  # exactly: no rounding left over from the additions
            self._idle.set()

    def submit_encode(
        self, fields: VoiceToEncode, tier: Tier = Tier.INTERACTIVE
    ) -> asyncio.Future[Encoded]:
        """Admit a voice to encode; the future resolves to an `encoded` message."""
        task = Encoding(
            id=f"encode-{next(self._task_ids)}",
            payload=fields,
            tier=tier,
        )
        self.admit([task])
        return task.future

    def submit_transcribe(
        self, fields: AsrAudio, tier: Tier = Tier.INTERACTIVE
    ) -> asyncio.Future[Transcript]:
        """Admit audio to transcribe (an ASR pool); the future resolves to a `transcript`."""
        task = Transcription(
            id=f"transcribe-{next(self._task_ids)}",
            payload=fields,
            tier=tier,
        )
        self.admit([task])
        return task.future

    def submit_align(
        self, fields: AsrAudio, tier: Tier = Tier.INTERACTIVE
    ) -> asyncio.Future[Aligned]:
        """Admit a segment to time word by word (an ASR pool); resolves to an `aligned`."""
        task = Alignment(
            id=f"align-{next(self._task_ids)}",
            payload=fields,
            tier=tier,
        )
        self.admit([task])
        return task.future

    def check_admission(self, owner: str | None = None) -> None:
        """Raise Unavailable (closed, no device) or Overloaded if the queue is already full, or
        `owner` already holds its share of it (`admission.OwnerShares`).

        A request is admitted whenever the queue is below its limit, whatever its own size, so
        the queue holds at most the limit plus one request. Checking `queued + incoming` instead
        would starve long requests under sustained load: short ones would keep filling the room
        a long one waits for (in a saturated mixed benchmark, long requests were refused again and
        again until they gave up).
        """
        if self.closed is not None:
            raise self.closed
        if self.capacity < 1:
            raise Unavailable("no device can take work: every sidecar has failed", retry_after_s=60)
        limit = self.settings.max_queue_audio_s * self.capacity
        busy = self.unfinished or self.reservations
        rate = (self.throughput or UNMEASURED_THROUGHPUT) * self.capacity
        self.owners.check(owner, limit, rate)
        if busy and self.admitted_audio_s >= limit:
            excess = self.admitted_audio_s - limit
            raise Overloaded(
                f"the queue holds {self.admitted_audio_s:.0f} s of audio to generate, the limit is {limit:.0f} s",
                retry_after_s=min(MAX_RETRY_AFTER_S, excess / rate),
            )

    def admit(self, tasks: list[Task], reservation: Reservation | None = None) -> None:
        if reservation is None:
            self.check_admission(counted(tasks[0]) if tasks else None)
        elif self.capacity < 1:
            raise Unavailable("no device can take work: every sidecar has failed", retry_after_s=60)
        for task in tasks:
            self.shares.arrive(task, self.queues[task.tier])
            self.queues[task.tier].append(task)
            self.unfinished.add(task)
            covered = reservation.take(task.est_audio_s) if reservation is not None else 0.0
            self.admitted_audio_s += task.est_audio_s - covered
            self.owners.add(counted(task), task.est_audio_s - covered)
            # However it ends (answer, error, or its caller cancelling), it leaves the books.
            task.future.add_done_callback(functools.partial(self._settle, task))
        self._idle.clear()
        self.wake()

    def close(self, reason: ServerError) -> None:
        """Refuse everything from now on with `reason` (draining)."""
        self.closed = reason

    # ------------------------------------------------------------ batching

    def has_work(self) -> bool:
        return any(not t.done for q in self.queues.values() for t in q)

    def _queued(self) -> Iterator[Task]:
        yield from self.shares.queued(self.queues)

    def next_batch(
        self,
        *,
        ahead: bool = False,
        only_full: bool = False,
        now: float | None = None,
        bulk_only: bool = False,
    ) -> Batch | None:
        """The next batch to send, or None. `ahead`: the sidecar is busy, so only a full or overdue
        batch; `only_full`: only a full one; `bulk_only`: no interactive task (they join instead).

        A task the poison rule isolated (`alone`) never goes ahead: it waits for an idle sidecar,
        so that nothing else runs in the process that its kill may be blamed on.
        """
        now = time.monotonic() if now is None else now
        packed = batching.pack(self._queued(), self.settings, ahead=ahead, bulk_only=bulk_only)
        chosen, full = packed.tasks, packed.full
        if not chosen:
            return None
        if only_full and not full:
            return None
        if ahead and not full:
            waited_ms = (now - min(t.queued_at for t in chosen)) * 1000
            if waited_ms < self.settings.max_batch_latency_ms:
                return None
        return self._taken(chosen, now)

    def next_join_batch(
        self, now: float | None = None, max_tokens: int | None = None
    ) -> Batch | None:
        """The interactive generation tasks waiting, as a batch that may join a sidecar's
        running batch at its next step: sent at once, never held back to fill up. At most
        `max_tokens` estimated tokens, if given (none, if the first task would pass them)."""
        now = time.monotonic() if now is None else now
        chosen = batching.pack_join(self._queued(), self.settings, max_tokens)
        return self._taken(chosen, now, Tier.INTERACTIVE) if chosen else None

    def _taken(self, chosen: list[Task], now: float, tier: Tier = Tier.BULK) -> Batch:
        """`chosen` out of the queues, as a batch of their kind (`tier`: how it runs)."""
        kind = chosen[0].kind
        for task in chosen:
            self.queues[task.tier].remove(task)
            self.shares.take(task)
            metrics.queue_wait.labels(kind).observe(now - task.queued_at)
        metrics.batch_size.labels(kind).observe(len(chosen))
        return Batch(next(self._batch_ids), kind, chosen, tier=tier)

    # ------------------------------------------------------------ outcomes

    def resolve(self, task: Task, message: Answer) -> None:
        """Resolve a task's future with its answer (ProtocolError: not its kind's answer)."""
        if not task.done:
            task.resolve(message)

    def reject(self, task: Task, error: ServerError) -> None:
        if not task.done:
            task.future.set_exception(error)

    def _settle(self, task: Task, done: object) -> None:
        if task.future.cancelled() and task in self.queues[task.tier]:  # timed out, or abandoned
            self.queues[task.tier].remove(task)  # (in a batch, its result is dropped instead)
        if task in self.unfinished:
            self.unfinished.discard(task)
            self.admitted_audio_s = max(0.0, self.admitted_audio_s - task.est_audio_s)
            self.owners.remove(counted(task), task.est_audio_s)
            self._set_idle_if_done()

    def finish_batch(
        self, batch: Batch, wall_s: float, audio_s: float, stats: dict[str, float] | None = None
    ) -> None:
        """Record a finished batch's throughput (its tasks have all been resolved or rejected).

        `stats` is the `done` frame's: the sidecar's own wall time and step count.
        """
        metrics.audio_produced.inc(audio_s)
        if stats and stats.get("steps") and stats.get("wall_s"):
            metrics.batch_step.observe(stats["wall_s"] / stats["steps"])
        if wall_s > 0 and audio_s > 0:
            rate = audio_s / wall_s
            old = self.throughput
            self.throughput = rate if old is None else old + THROUGHPUT_SMOOTHING * (rate - old)

    def requeue(self, batch: Batch, reason: str, ran: bool) -> None:
        """A sidecar died with this batch. `ran`: it was the batch being generated, not one queued behind it."""
        back = []
        for task in batch.pending():
            if ran:
                task.kills.append(reason)
                if len(batch.tasks) == 1 and task.alone:
                    self.reject(
                        task,
                        PoisonRequest(
                            f"this request crashed a sidecar while running alone, after {len(task.kills) - 1} earlier "
                            f"batches with it were killed (reasons: {', '.join(task.kills)}); it will not be retried"
                        ),
                    )
                    continue
            task.queued_at = time.monotonic()
            back.append(task)
        for task in reversed(back):
            self.queues[task.tier].appendleft(task)
        if back:
            self.wake()

    def fail_batch(self, batch: Batch, error: ServerError) -> None:
        for task in batch.pending():
            self.reject(task, error)

    def waiting(self) -> set[asyncio.Future[Result]]:
        """The futures of the generation tasks no sidecar has taken yet."""
        return {task.future for task in self._queued() if isinstance(task, Generation)}

    def fail_queued(self, error: ServerError) -> None:
        """End every task still waiting for a sidecar (shutdown, or no device left)."""
        for task in list(self._queued()):
            self.queues[task.tier].remove(task)
            self.reject(task, error)

    async def wait_until_idle(self, timeout_s: float) -> bool:
        """True once every admitted task has ended; False if timeout_s passed first."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout_s)
        except asyncio.TimeoutError:
            return False
        return True

    def depth(self) -> QueueDepth:
        return {
            "tasks": len(self.unfinished),
            "reservations": len(self.reservations),
            "queued": sum(1 for q in self.queues.values() for t in q if not t.done),
            "audio_s": round(self.admitted_audio_s, 2),
            "limit_audio_s": self.settings.max_queue_audio_s * self.capacity,
            # estimated audio not yet sent to a sidecar, by tier (the console's queue view)
            "waiting_audio_s": {
                tier.value: round(sum(t.est_audio_s for t in q if not t.done), 2)
                for tier, q in self.queues.items()
            },
        }
