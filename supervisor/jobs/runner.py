"""The job runner: queued job items through the speech endpoint's own synthesis path, at their
tier (bulk unless an item asks for another).

One asyncio task, woken by a new job or a finished item, and every half second. Each pass it:

    if the server is draining: starts nothing, and hands back (to `queued`, no attempt counted)
    every item no sidecar has begun; those begun finish within the drain and are written
    puts back items whose lease ran out (PostgreSQL: a server died or lost the database)
    removes jobs past their retention (once a minute)
    refreshes each job's estimated finish (once a second; supervisor/jobs/finish_estimates.py), and warms up
    a sidecar for the next `not_before` (supervisor/jobs/warm_up.py)
    sends the callbacks of jobs that ended (supervisor/jobs/callback_sender.py)
    starts queued items while there is room: of jobs whose `not_before` has come, the earliest
    deadline first (jobs without one last), then the oldest job

A second task renews the leases of the items this server works on (PostgreSQL; a no-op with
SQLite, where one server holds the store) and stops any another server took over, or whose job
was cancelled through another server.

Which items start, and what each becomes: supervisor/jobs/intake.py; how a finished one is
written: supervisor/jobs/results.py; the warm-up for a scheduled job: supervisor/jobs/warm_up.py.
An item is claimed in the store (queued -> running) only once its SynthesisRun has been admitted.

When the store itself cannot record an item's end (a full disk, a stopped database), the end is
kept here and written again each pass until the store takes it; meanwhile no item starts, and the
condition is logged once (not a traceback per pass), and once more when it is over. New jobs get a
507 (a full disk) or a 503 (a database that cannot be reached).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import logging
import sqlite3
import time

from supervisor import metrics
from supervisor.database import StoreUnavailable
from supervisor.errors import Overloaded, QualityFailed, ServerError, SidecarLost, Unavailable
from supervisor.jobs import intake
from supervisor.jobs.callback_sender import CallbackSender
from supervisor.jobs.finish_estimates import FinishEstimates
from supervisor.jobs.full_disk import FullDiskWait
from supervisor.jobs.intake import Intake
from supervisor.jobs.results import ResultWriter
from supervisor.jobs.storage import Claimed, JobStorage, Key, out_of_space
from supervisor.jobs.views import JobView
from supervisor.jobs.warm_up import WarmUp
from supervisor.services import Services
from supervisor.speech.checks import word_timestamps
from supervisor.speech.stores.single_flight import Flight, Flights
from supervisor.speech.synthesis.runner import SynthesisRun
from supervisor.tracing import spans
from supervisor.tracing.items import item_span

log = logging.getLogger("omnivoice.jobs")

TICK_S = 0.5
SWEEP_EVERY_S = 60.0
OUTLOOK_EVERY_S = 1.0
STOP_WAIT_S = 10.0  # at shutdown, how long items already generated get to be written

# The store refusing or unreachable, not a bug: a full disk, a damaged file, a stopped database.
STORAGE_ERRORS = (OSError, sqlite3.Error, StoreUnavailable)


class JobRunner:
    def __init__(self, svc: Services, store: JobStorage) -> None:
        self.svc = svc
        self.store = store
        self.generating: dict[Key, SynthesisRun] = {}
        # Items whose end the store could not record (a full disk): failed with this error, or
        # released (None). Written again each pass.
        self.unrecorded: dict[Key, ServerError | None] = {}
        self.storage_error: str | None = None
        self.space = (
            FullDiskWait()
        )  # a full disk refused a result: no item starts until it has room
        self.tasks: set[asyncio.Task[None]] = set()
        self.item_tasks: dict[Key, asyncio.Task[None]] = {}  # each item's task, until it ends
        self.flights = Flights()  # items' cache keys being made ("job" keys: none is a speech one)
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._leases: asyncio.Task[None] | None = None
        # Set when stop() cancels the items still running (Task.cancelling() would say so, but
        # only from Python 3.11).
        self._stopping = False
        self.warm = WarmUp(svc, store)
        self.outlook = FinishEstimates(store, svc.scheduler, self.warm.startup_s)
        self._deadline_metrics: metrics.DeadlineCollector | None = None
        self.callbacks = CallbackSender(
            svc.settings.jobs, svc.settings.tenancy, store, self.outlook.annotate
        )
        self.results = ResultWriter(svc, store, self.space, self.record, self.storage_failed)

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
        await self.outlook.refresh()
        self._deadline_metrics = metrics.watch_deadlines(self.outlook.summary)
        self._task = asyncio.create_task(self.run(), name="jobs")
        self._leases = asyncio.create_task(self.keep_leases(), name="job-leases")

    async def refresh_outlook(self) -> None:
        await self.outlook.refresh()

    def with_outlook(self, job: JobView | None) -> JobView:
        """A job object from the store, with its estimated finish and deadline risk, and how the
        warm-up for it goes while one is under way (else `warm_up` is null)."""
        assert job is not None
        warming = self.warm.warming(job, self.outlook.not_before.get(job["id"]))
        job["warm_up"] = self.warm.report() if warming else None
        unfinished = job["state"] in ("queued", "running")
        job["waiting_for_space"] = self.space.report() if unfinished else None
        return self.outlook.annotate(job)

    async def run(self) -> None:
        next_sweep = 0.0
        while True:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), TICK_S)
            self._wakeup.clear()
            try:
                if self.svc.pool.draining:
                    self.hand_back_unbegun()
                    continue
                await asyncio.to_thread(self.store.expire)
                await self.record_unrecorded()
                if self.unrecorded:
                    continue
                if self.svc.settings.jobs.job_retention_s > 0 and time.monotonic() >= next_sweep:
                    next_sweep = time.monotonic() + SWEEP_EVERY_S
                    removed = await asyncio.to_thread(
                        self.store.sweep, self.svc.settings.jobs.job_retention_s
                    )
                    if removed:
                        log.info("jobs: removed %d job(s) past their retention", len(removed))
                if time.monotonic() - self.outlook.refreshed_at >= OUTLOOK_EVERY_S:
                    await self.outlook.refresh()
                    await self.warm.keep_ready()
                await self.callbacks.dispatch()
                if await self.space.over(self.store):
                    await self.start_items()
            except asyncio.CancelledError:
                raise
            except STORAGE_ERRORS as exc:  # the storage, not a bug: one line, no traceback
                self.storage_failed(exc)
            except Exception:  # a bug here must not stop the jobs for good
                log.exception("job runner pass failed")
            else:
                self.storage_works()

    # ------------------------------------------------------------ the store refusing writes

    def storage_failed(self, exc: BaseException) -> None:
        if self.storage_error is None:
            log.error(
                "jobs: the job store cannot be written (%s): no item starts until it can", exc
            )
        self.storage_error = str(exc)

    def storage_works(self) -> None:
        if self.storage_error is not None and not self.unrecorded:
            log.info("jobs: the job store can be written again")
            self.storage_error = None

    async def record(self, key: Key, error: ServerError | None) -> None:
        """End an item: failed with error, or released (None; while the server drains or stops,
        its attempt is not counted: it goes back untouched or cut short by the stop). If the
        store refuses the write, keep the end to write again next pass."""
        try:
            if error is None:
                counted = not (self.svc.pool.draining or self._stopping)
                await asyncio.to_thread(self.store.release, key, counted)
            else:
                await asyncio.to_thread(self.store.fail, key, error)
        except STORAGE_ERRORS as exc:
            # A full disk: the reserve freed makes room for the end (once).
            if out_of_space(exc) and await asyncio.to_thread(self.store.release_reserve):
                self.space.refused(0, exc)
                return await self.record(key, error)
            self.storage_failed(exc)
            self.unrecorded[key] = error
            return
        self.unrecorded.pop(key, None)

    async def record_unrecorded(self) -> None:
        for key, error in list(self.unrecorded.items()):
            await self.record(key, error)
            if key in self.unrecorded:
                return  # still refused: try again next pass

    async def keep_leases(self) -> None:
        """Renew our claims on the items we work on (PostgreSQL) every third of a lease, on a
        thread of its own: a pass of the runner, or the default executor busy writing results,
        must not delay a renewal until the lease runs out."""
        loop = asyncio.get_running_loop()
        executor = concurrent.futures.ThreadPoolExecutor(1, "job-leases")
        try:
            while True:
                await asyncio.sleep(self.svc.settings.jobs.lease_s / 3)
                keys = list(self.item_tasks)
                if not keys:
                    continue
                try:
                    kept = await loop.run_in_executor(executor, self.store.renew, keys)
                except STORAGE_ERRORS as exc:
                    self.storage_failed(exc)
                    continue
                self.stop_lost(set(keys) - kept)
        finally:
            executor.shutdown(wait=False)  # a renewal in flight must not hold up the stop

    def stop_lost(self, lost: set[Key]) -> None:
        """Stop items no longer ours to run: taken over by another server after our lease ran
        out (`release` then changes nothing), or of a job cancelled through another server
        (`release` ends them `cancelled`). One being written is left to `finish`."""
        for key in lost:
            synthesis = self.generating.get(key)
            if synthesis is not None:
                log.info(
                    "jobs: item %s/%d is no longer ours to run (taken over, or its job "
                    "cancelled); stopping it",
                    *key,
                )
                synthesis.close()

    # ------------------------------------------------------------ starting items

    async def start_items(self) -> None:
        room = intake.room(self.svc, len(self.generating))
        if room <= 0:
            return
        taken = Intake(self.svc, self.store, self.flights)
        await taken.gather(await asyncio.to_thread(self.store.queued, room), self.item_tasks)
        if not taken:
            return
        flights = taken.lead()
        try:
            claimed = await asyncio.to_thread(self.store.claim, [*taken.admitted, *taken.found])
        except BaseException:
            taken.give_back(flights)
            raise
        if len(claimed) < len(taken.admitted) + len(taken.found):
            self.wake()  # another server took some: look again now, not a tick later
        for key, (item, entry) in taken.found.items():
            if key in claimed:  # from the cache: nothing to generate
                await self.results.write_found(item, entry)
        if taken.found:
            self.wake()  # the next items at once, not at the next tick
        for key, (item, synthesis, name) in taken.admitted.items():
            flight = flights.get(key)
            if key in claimed:
                self.launch(item, synthesis, name, flight)
                continue
            synthesis.close()  # cancelled meanwhile, or claimed by another server
            if flight is not None:
                flight.land(None)

    def launch(
        self, item: Claimed, synthesis: SynthesisRun, name: str | None, flight: Flight | None
    ) -> None:
        """Run a claimed item's synthesis in a task of its own."""
        key = item.key
        self.generating[key] = synthesis
        task = spans.start_task(  # its spans go under the item's root, which ends with it
            item_span(item, synthesis),
            self.run_item(item, synthesis, name),
            name=f"job-item-{item.job_id}-{item.n}",
        )
        self.tasks.add(task)
        self.item_tasks[key] = task
        task.add_done_callback(self.tasks.discard)
        task.add_done_callback(functools.partial(self.forget_task, key))
        if flight is not None:  # ended, its audio kept or not: identical items go on from there
            task.add_done_callback(functools.partial(self.landed, flight))

    # ------------------------------------------------------------ one item

    async def run_item(self, item: Claimed, synthesis: SynthesisRun, name: str | None) -> None:
        key = item.key
        try:
            pieces = [piece async for piece in synthesis.pieces()]
            pcm = b"".join(piece.audio for piece in pieces)
            await word_timestamps.item_words(
                item.request, self.svc.asr, synthesis, pcm, self.svc.settings.speech.asr_timeout_s
            )
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
        verdict = synthesis.verdict
        if not verdict.passed:  # never passed off as good: the item fails, saying which checks
            log.info("jobs: item %s/%d failed: %s", item.job_id, item.n, verdict.reason())
            await self.record(key, QualityFailed(verdict.reason(), verdict.summary()))
            return
        await self.results.write(item, synthesis, pieces, name)

    # ------------------------------------------------------------ cancelling and stopping

    def forget_task(self, key: Key, _task: asyncio.Task[None]) -> None:
        self.item_tasks.pop(key, None)

    def landed(self, flight: Flight, _task: asyncio.Task[None]) -> None:
        """An item with a cache key ended (its audio in the cache if it was kept): the items
        held back behind it are looked at again now."""
        flight.land(None)
        self.wake()

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

    def hand_back_unbegun(self) -> None:
        """Draining: close what no sidecar has begun (its item goes back to `queued`, its attempt
        not counted); what has begun goes on, so that nothing is made twice."""
        waiting = self.svc.scheduler.waiting()
        for synthesis in list(self.generating.values()):
            if not synthesis.begun(waiting):
                synthesis.close()

    def close_all(self) -> None:
        """Close every synthesis in flight; their items go back to the queue."""
        for synthesis in list(self.generating.values()):
            synthesis.close()

    async def stop(self) -> None:
        """Stop starting items, give back what is generating, let finished ones be written."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._deadline_metrics is not None:
            metrics.unwatch(self._deadline_metrics)
            self._deadline_metrics = None
        await self.callbacks.close()
        # Leases stay renewed while the items finished meanwhile are written (below).
        self.close_all()
        if self.tasks:
            _, late = await asyncio.wait(set(self.tasks), timeout=STOP_WAIT_S)
            self._stopping = True
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)
        if self._leases is not None:
            self._leases.cancel()
            await asyncio.gather(self._leases, return_exceptions=True)
