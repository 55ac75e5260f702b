"""The job runner: queued job items through the speech endpoint's own synthesis path, at bulk priority.

One asyncio task, woken by a new job or a finished item, and every half second. Each pass it:

    releases everything it runs, if the server is draining (the items run again after the restart)
    removes jobs past their retention (once a minute)
    starts queued items while there is room

An item is validated again as a speech request, its voice resolved, and it becomes a
`Synthesis` at `Priority.BULK`: the scheduler puts every interactive task ahead of it. Room is
bounded twice: by count (enough to fill two batches per usable sidecar), and by admitted audio,
of which job items may take at most `BULK_SHARE` of the admission limit, so that interactive
requests are still admitted while a large job runs. An item is claimed in the store (queued ->
running) only once its Synthesis has been admitted.

How an item ends:

    all its audio           encoded, written atomically, `done`
    an error of the item    `failed`, with the error (bad input, a poison request, ...)
    not the item's fault    `queued` again: over capacity, draining, or no device left
    its job cancelled       `cancelled` (a synthesis already running is closed)

A full disk: a result that cannot be written ends its item `failed`, saying so (the temporary
file is removed). When the store itself cannot record an item's end, the end is kept here and
written again each pass until the disk takes it; meanwhile no item starts, and the condition is
logged once (not a traceback per pass), and once more when it is over. New jobs get a 507.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import sqlite3
import time
from typing import Any

from supervisor import formats, schemas
from supervisor.api import Services
from supervisor.errors import InsufficientStorage, Overloaded, ServerError, SidecarLost, Unavailable
from supervisor.jobs import Claimed, JobStore
from supervisor.scheduler import Priority
from supervisor.synthesis import Synthesis
from supervisor.voice_store import resolve_voice

log = logging.getLogger("omnivoice.jobs")

BULK_SHARE = 0.5  # most of the admission limit job items may hold
WINDOW_BATCHES = 2  # items in flight: this many full batches per usable sidecar
TICK_S = 0.5
SWEEP_EVERY_S = 60.0
STOP_WAIT_S = 10.0  # at shutdown, how long items already generated get to be written

Key = tuple[str, int]


class JobRunner:
    def __init__(self, svc: Services, store: JobStore) -> None:
        self.svc = svc
        self.store = store
        self.generating: dict[Key, Synthesis] = {}
        # Items whose end the store could not record (a full disk): failed with this error, or
        # released (None). Written again each pass.
        self.unrecorded: dict[Key, ServerError | None] = {}
        self.storage_error: str | None = None
        self.tasks: set[asyncio.Task[None]] = set()
        self.item_tasks: dict[Key, asyncio.Task[None]] = {}  # each item's task, until it ends
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        # Set when stop() cancels the items still running (Task.cancelling() would say so, but
        # only from Python 3.11).
        self._stopping = False

    def wake(self) -> None:
        self._wakeup.set()

    async def start(self) -> None:
        done, queued = await asyncio.to_thread(self.store.recover)
        if done or queued:
            log.info(
                "jobs: after the last stop, %d item(s) found finished, %d to run again",
                done,
                queued,
            )
        self._task = asyncio.create_task(self.run(), name="jobs")

    async def run(self) -> None:
        next_sweep = 0.0
        while True:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), TICK_S)
            self._wakeup.clear()
            try:
                if self.svc.pool.draining:
                    self.close_all()
                    continue
                await self.record_unrecorded()
                if self.unrecorded:
                    continue
                if self.svc.settings.job_retention_s > 0 and time.monotonic() >= next_sweep:
                    next_sweep = time.monotonic() + SWEEP_EVERY_S
                    removed = await asyncio.to_thread(
                        self.store.sweep, self.svc.settings.job_retention_s
                    )
                    if removed:
                        log.info("jobs: removed %d job(s) past their retention", len(removed))
                await self.start_items()
            except asyncio.CancelledError:
                raise
            except (OSError, sqlite3.Error) as exc:  # the disk, not a bug: one line, no traceback
                self.storage_failed(exc)
            except Exception:  # a bug here must not stop the jobs for good
                log.exception("job runner pass failed")
            else:
                self.storage_works()

    # ------------------------------------------------------------ the store refusing writes

    def storage_failed(self, exc: BaseException) -> None:
        if self.storage_error is None:
            log.error("jobs: the job store cannot be written (%s): no item starts until it can",
                      exc)  # fmt: skip
        self.storage_error = str(exc)

    def storage_works(self) -> None:
        if self.storage_error is not None and not self.unrecorded:
            log.info("jobs: the job store can be written again")
            self.storage_error = None

    async def record(self, key: Key, error: ServerError | None) -> None:
        """End an item: failed with error, or released (None). If the store refuses the write,
        keep the end to write again next pass."""
        try:
            if error is None:
                await asyncio.to_thread(self.store.release, key)
            else:
                await asyncio.to_thread(self.store.fail, key, error)
        except (OSError, sqlite3.Error) as exc:
            self.storage_failed(exc)
            self.unrecorded[key] = error
            return
        self.unrecorded.pop(key, None)

    async def record_unrecorded(self) -> None:
        for key, error in list(self.unrecorded.items()):
            await self.record(key, error)
            if key in self.unrecorded:
                return  # still refused: try again next pass

    # ------------------------------------------------------------ starting items

    def room(self) -> int:
        s, scheduler = self.svc.settings, self.svc.scheduler
        if scheduler.closed is not None or scheduler.capacity < 1 or self.over_share():
            return 0
        return s.max_batch_size * scheduler.capacity * WINDOW_BATCHES - len(self.generating)

    def over_share(self) -> bool:
        scheduler = self.svc.scheduler
        return (
            scheduler.admitted_audio_s
            >= self.svc.settings.max_queue_audio_s * scheduler.capacity * BULK_SHARE
        )

    def prepare(self, item: Claimed) -> Synthesis:
        """The item as a speech request, admitted at bulk priority; raises as the speech route would."""
        speech = schemas.speech_request(item.request, self.svc.settings)
        voice = resolve_voice(speech, self.svc.voices)
        return Synthesis(
            self.svc.scheduler, speech, voice, self.svc.settings.chunk_s, Priority.BULK
        )

    async def start_items(self) -> None:
        room = self.room()
        if room <= 0:
            return
        admitted: dict[Key, tuple[Claimed, Synthesis]] = {}
        for item in await asyncio.to_thread(self.store.queued, room):
            try:
                admitted[item.key] = (item, self.prepare(item))
            except (Overloaded, Unavailable):
                break  # not now; it stays queued
            except ServerError as exc:  # no longer valid: a saved voice deleted, a limit lowered
                await asyncio.to_thread(self.store.fail, item.key, exc, False)
                continue
            except (
                Exception
            ) as exc:  # a bug must not leave the item at the head of the queue for ever
                log.exception("jobs: item %s/%d cannot be prepared", item.job_id, item.n)
                await asyncio.to_thread(
                    self.store.fail,
                    item.key,
                    ServerError(f"the item cannot be run: {exc!r}"),
                    False,
                )
                continue
            if self.over_share():
                break
        if not admitted:
            return
        try:
            claimed = await asyncio.to_thread(self.store.claim, list(admitted))
        except BaseException:
            for _, synthesis in admitted.values():
                synthesis.close()  # give the admitted audio back
            raise
        for key, (item, synthesis) in admitted.items():
            if key not in claimed:  # cancelled meanwhile
                synthesis.close()
                continue
            self.generating[key] = synthesis
            task = asyncio.create_task(
                self.run_item(item, synthesis), name=f"job-item-{item.job_id}-{item.n}"
            )
            self.tasks.add(task)
            self.item_tasks[key] = task
            task.add_done_callback(self.tasks.discard)
            task.add_done_callback(functools.partial(self.forget_task, key))

    # ------------------------------------------------------------ one item

    async def run_item(self, item: Claimed, synthesis: Synthesis) -> None:
        key = item.key
        try:
            pieces = [piece async for piece in synthesis.pieces()]
        except asyncio.CancelledError:
            if self._stopping:
                raise  # the runner is stopping: `recover` puts the item back at the next start
            # Our synthesis was closed: its job was cancelled (release ends it `cancelled`) or the server drains.
            await self.record(key, None)
            return
        except (Overloaded, Unavailable, SidecarLost) as exc:  # not the item's fault: it runs again
            log.info(
                "jobs: item %s/%d goes back to the queue: %s", item.job_id, item.n, exc.message
            )
            await self.record(key, None)
            return
        except ServerError as exc:
            log.info("jobs: item %s/%d failed: %s", item.job_id, item.n, exc.message)
            await self.record(key, exc)
            return
        except (
            Exception
        ) as exc:  # a bug: the item fails with it rather than staying `running` until a restart
            log.exception("jobs: item %s/%d", item.job_id, item.n)
            await self.record(key, ServerError(f"internal error: {exc!r}"))
            return
        finally:
            self.generating.pop(key, None)
            self.wake()
        await self.write(item, synthesis, pieces)

    async def write(
        self, item: Claimed, synthesis: Synthesis, pieces: list[dict[str, Any]]
    ) -> None:
        """Encode and store a finished item; from here on nothing cancels it."""
        pcm = b"".join(piece["audio"] for piece in pieces)
        try:
            data = await asyncio.to_thread(
                formats.encode, item.format, pcm, pieces[0]["sample_rate"]
            )
        except (
            Exception
        ) as exc:  # libav refusing the audio is this item's failure, not the runner's
            log.exception(
                "jobs: item %s/%d could not be encoded as %s", item.job_id, item.n, item.format
            )
            await self.record(
                item.key, ServerError(f"encoding the audio as {item.format} failed: {exc}")
            )
            return
        try:
            await asyncio.to_thread(
                self.store.finish, item.key, item.format, data, synthesis.seed, synthesis.audio_s
            )
        except (
            OSError,
            sqlite3.Error,
        ) as exc:  # disk full, data directory gone: it fails, saying so
            log.error("jobs: item %s/%d: writing the result failed: %s", item.job_id, item.n, exc)
            self.storage_failed(exc)
            await self.record(item.key, InsufficientStorage(f"writing the result failed: {exc}"))

    # ------------------------------------------------------------ cancelling and stopping

    def forget_task(self, key: Key, _task: asyncio.Task[None]) -> None:
        self.item_tasks.pop(key, None)

    async def cancel_job(self, job_id: str, wait_s: float) -> None:
        """After the store cancelled a job: close what of it is still being generated, and wait
        (at most wait_s) until its items have ended: the answer counts them `cancelled` or `done`."""
        for key, synthesis in list(self.generating.items()):
            if key[0] == job_id:
                synthesis.close()  # run_item releases it; the store ends it `cancelled`
        # Those being written too: they end `done` within moments.
        ending = [task for key, task in self.item_tasks.items() if key[0] == job_id]
        if ending:
            await asyncio.wait(ending, timeout=wait_s)

    def close_all(self) -> None:
        """Close every synthesis in flight; their items go back to the queue."""
        for synthesis in list(self.generating.values()):
            synthesis.close()

    async def stop(self) -> None:
        """Stop starting items, give back what is generating, let finished ones be written."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self.close_all()
        if self.tasks:
            _, late = await asyncio.wait(set(self.tasks), timeout=STOP_WAIT_S)
            self._stopping = True
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)
