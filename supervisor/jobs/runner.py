"""The job runner: queued job items through the speech endpoint's own synthesis path, at bulk priority.

One asyncio task, woken by a new job or a finished item, and every half second. Each pass it:

    if the server is draining: starts nothing, and hands back (to `queued`, no attempt counted)
    every item no sidecar has begun; those begun finish within the drain and are written
    puts back items whose lease ran out (PostgreSQL: a server died or lost the database)
    removes jobs past their retention (once a minute)
    refreshes each job's estimated finish (once a second; supervisor/jobs/outlook.py), and warms up
    a sidecar for the next `not_before` (`warm_for_schedule`)
    sends the callbacks of jobs that ended (supervisor/jobs/callback_sender.py)
    starts queued items while there is room: of jobs whose `not_before` has come, the earliest
    deadline first (jobs without one last), then the oldest job

A second task renews the leases of the items this server works on (PostgreSQL; a no-op with
SQLite, where one server holds the store) and stops any another server took over, or whose job
was cancelled through another server.

An item is validated again as a speech request, its voice resolved, and it becomes a
`Synthesis` at `Priority.BULK`: the scheduler puts every interactive task ahead of it. Room is
bounded twice: by count (enough to fill three batches per usable sidecar), and by admitted audio,
of which job items may take at most `BULK_SHARE` of the admission limit, so that interactive
requests are still admitted while a large job runs. An item is claimed in the store (queued ->
running) only once its Synthesis has been admitted.

An item always has a seed (its own, its voice's, or one derived from its fields), so it is
looked up in the result cache first: one found there is claimed and written at once, with no
synthesis; one generated is kept there (`result_cache`). Identical items in flight are made once
(`single_flight`): an item whose cache key is being made by another stays queued, and is found
in the cache once that one is kept (or leads, if that one ended with nothing kept).

How an item ends:

    in the result cache     that file written atomically, `done`
    all its audio           encoded (delivery profile applied), written atomically, `done`
                            (with its `qa` checks)
    audio failing a check   `failed` with code `qa_failed` and its `qa`, once retries ran out
    an error of the item    `failed`, with the error (bad input, a poison request, ...)
    not the item's fault    `queued` again: over capacity, draining, or no device left
    its job cancelled       `cancelled` (a synthesis already running is closed)

A full disk (supervisor/jobs/space.py): a result that cannot be written for want of space puts
its item back in the queue (its attempt counted; after `SPACE_ATTEMPTS` it fails with
`insufficient_storage`), the temporary file removed, and the runner waits for space: no item
starts until a probe finds room, then they run again by themselves. Another write error fails
the item, saying so; a database that cannot be reached puts the item back in the queue. When the
store itself cannot record an item's end, the end is kept here and written again each pass until
the store takes it; meanwhile no item starts, and the condition is logged once (not a traceback
per pass), and once more when it is over. New jobs get a 507 (a full disk) or a 503 (a database
that cannot be reached).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import functools
import logging
import sqlite3
import time
from typing import Any

from supervisor import metrics
from supervisor.database import StoreUnavailable
from supervisor.errors import (
    InsufficientStorage,
    Overloaded,
    QualityFailed,
    ServerError,
    SidecarLost,
    Unavailable,
)
from supervisor.jobs.callback_sender import CallbackSender
from supervisor.jobs.outlook import Outlook
from supervisor.jobs.space import SpaceWait, refused_item_end
from supervisor.jobs.storage import Claimed, JobStorage, out_of_space
from supervisor.services import Services
from supervisor.speech import delivery, result_cache, schemas, service, words
from supervisor.speech.piece import Piece
from supervisor.speech.result_cache import CachedResult
from supervisor.speech.schemas import SpeechRequest
from supervisor.speech.single_flight import Flight, Flights
from supervisor.speech.synthesis import Synthesis, Voice
from supervisor.speech.text import captions
from supervisor.supervision.scheduler import Priority
from supervisor.tenants import Tenant

log = logging.getLogger("omnivoice.jobs")

BULK_SHARE = 0.5  # most of the admission limit job items may hold
# Items in flight: this many full batches per usable sidecar, as many as a sidecar may hold
# (Session.room_ahead: one denoising, one in its pipe, one decoding).
WINDOW_BATCHES = 3
TICK_S = 0.5
SWEEP_EVERY_S = 60.0
OUTLOOK_EVERY_S = 1.0
# A sidecar is started this many times its measured time to ready, plus WARM_EXTRA_S, before a
# job's not_before, and kept until WARM_AFTER_S after it (then idle reaping applies as ever).
WARM_MARGIN = 1.5
WARM_EXTRA_S = 10.0
WARM_AFTER_S = 5.0
UNMEASURED_READY_S = 120.0  # no sidecar ever ready yet: DESIGN's load deadline
WARM_STATES = ("ready", "busy", "starting", "stopping", "backoff", "reaped", "failed")  # best first
STOP_WAIT_S = 10.0  # at shutdown, how long items already generated get to be written

Key = tuple[str, int]
# The store refusing or unreachable, not a bug: a full disk, a damaged file, a stopped database.
STORAGE_ERRORS = (OSError, sqlite3.Error, StoreUnavailable)


class JobRunner:
    def __init__(self, svc: Services, store: JobStorage) -> None:
        self.svc = svc
        self.store = store
        self.generating: dict[Key, Synthesis] = {}
        # Items whose end the store could not record (a full disk): failed with this error, or
        # released (None). Written again each pass.
        self.unrecorded: dict[Key, ServerError | None] = {}
        self.storage_error: str | None = None
        self.space = SpaceWait()  # a full disk refused a result: no item starts until it has room
        self.tasks: set[asyncio.Task[None]] = set()
        self.item_tasks: dict[Key, asyncio.Task[None]] = {}  # each item's task, until it ends
        self.flights = Flights()  # items' cache keys being made ("job" keys: none is a speech one)
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._leases: asyncio.Task[None] | None = None
        # Set when stop() cancels the items still running (Task.cancelling() would say so, but
        # only from Python 3.11).
        self._stopping = False
        self.outlook = Outlook(store, svc.scheduler, self.startup_s)
        self._deadline_metrics: metrics.DeadlineCollector | None = None
        self.callbacks = CallbackSender(svc.settings, store, self.outlook.annotate)
        self.warming_for: float | None = None  # the not_before a warm-up was last asked for

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

    def with_outlook(self, job: dict[str, Any] | None) -> dict[str, Any]:
        """A job object from the store, with its estimated finish and deadline risk, and how the
        warm-up for it goes while one is under way (else `warm_up` is null)."""
        assert job is not None
        not_before = self.outlook.not_before.get(job["id"])
        warming = (
            job["state"] == "queued"
            and not_before is not None
            and not_before == self.warming_for
            and time.time() < not_before
        )
        job["warm_up"] = self.warm_up_report() if warming else None
        unfinished = job["state"] in ("queued", "running")
        job["waiting_for_space"] = self.space.report() if unfinished else None
        return self.outlook.annotate(job)

    def warm_up_report(self) -> dict[str, Any]:
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
                if self.svc.settings.job_retention_s > 0 and time.monotonic() >= next_sweep:
                    next_sweep = time.monotonic() + SWEEP_EVERY_S
                    removed = await asyncio.to_thread(
                        self.store.sweep, self.svc.settings.job_retention_s
                    )
                    if removed:
                        log.info("jobs: removed %d job(s) past their retention", len(removed))
                if time.monotonic() - self.outlook.refreshed_at >= OUTLOOK_EVERY_S:
                    await self.outlook.refresh()
                    await self.warm_for_schedule()
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

    def startup_s(self) -> float:
        """How long until a sidecar can take work: 0 with one running, else its last start time."""
        if any(s["state"] in ("ready", "busy") for s in self.svc.pool.health()["sidecars"]):
            return 0.0
        return self.svc.pool.time_to_ready_s or UNMEASURED_READY_S

    async def warm_for_schedule(self) -> None:
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
            log.info("jobs: a job may start in %.0f s: keeping a sidecar ready for it (its last "
                     "start took %.1f s)", start - now, ready_s)  # fmt: skip

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
                await asyncio.sleep(self.svc.settings.lease_s / 3)
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
                log.info("jobs: item %s/%d is no longer ours to run (taken over, or its job "
                         "cancelled); stopping it", *key)  # fmt: skip
                synthesis.close()

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

    def owner(self, item: Claimed) -> Tenant:
        """Whose the item's job is: its voices and lexicons are its API key's (supervisor.tenants)."""
        return self.svc.settings.tenancy.for_owner(item.owner)

    def resolve(self, item: Claimed) -> tuple[SpeechRequest, Voice]:
        """The item as a speech request and its voice; raises as the speech route would. An item
        always has a seed (derived from its fields when it names none), so it is reproducible."""
        fields = {key: value for key, value in item.request.items() if key not in words.ITEM_FIELDS}
        speech = schemas.speech_request(fields, self.svc.settings)
        voice = service.voice(self.svc, self.owner(item), speech)
        if speech.seed is None:
            seed = voice.seed if voice.seed is not None else result_cache.item_seed(item.request)
            speech = dataclasses.replace(speech, seed=seed)
        return speech, voice

    async def synthesis(self, item: Claimed, speech: SpeechRequest, voice: Voice) -> Synthesis:
        """The item admitted at bulk priority, its text read off the event loop; raises as the
        speech route would."""
        return await service.start(self.svc, self.owner(item), speech, voice,
                                   priority=Priority.BULK,
                                   captions=item.request.get("captions") is True)  # fmt: skip

    def cache_key(self, item: Claimed, speech: SpeechRequest, voice: Voice) -> str | None:
        """The item's result-cache entry; none for an item with captions (the cache keeps the
        audio alone) or one the cache cannot key (`result_cache.cacheable`)."""
        cache = self.svc.results
        if cache is None or item.request.get("captions") is True:
            return None
        if not result_cache.cacheable(speech):
            return None
        return result_cache.key(cache.identity, speech, voice, self.svc.settings, "job", item.owner)

    async def start_items(self) -> None:
        room = self.room()
        if room <= 0:
            return
        admitted: dict[Key, tuple[Claimed, Synthesis, str | None]] = {}
        found: dict[Key, tuple[Claimed, CachedResult]] = {}
        leading: set[str] = set()  # the admitted items' cache keys
        for item in await asyncio.to_thread(self.store.queued, room):
            if item.key in self.item_tasks:  # ours still, its lease lost in an outage: not twice
                continue
            try:
                speech, voice = self.resolve(item)
                name = self.cache_key(item, speech, voice)
                if name is not None and self.svc.results is not None:
                    entry = await asyncio.to_thread(self.svc.results.get, name)
                    if entry is not None:
                        found[item.key] = (item, entry)
                        continue
                if name is not None and (self.flights.flying(name) or name in leading):
                    continue  # an identical item is being made: it stays queued until it is kept
                synthesis = await self.synthesis(item, speech, voice)
                admitted[item.key] = (item, synthesis, name)
                if name is not None:
                    leading.add(name)
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
        if not admitted and not found:
            return
        flights = {key: self.flights.lead(name) for key, (_, _, name) in admitted.items() if name}
        try:
            claimed = await asyncio.to_thread(self.store.claim, [*admitted, *found])
        except BaseException:
            for _, synthesis, _ in admitted.values():
                synthesis.close()  # give the admitted audio back
            for flight in flights.values():
                flight.land(None)
            raise
        if len(claimed) < len(admitted) + len(found):
            self.wake()  # another server took some: look again now, not a tick later
        for key, (item, entry) in found.items():
            if key in claimed:  # from the cache: nothing to generate
                meta = entry.meta
                qa = meta.get("qa")
                await self.store_result(item, entry.data, meta["seed"], meta["audio_s"], qa=qa)
        if found:
            self.wake()  # the next items at once, not at the next tick
        for key, (item, synthesis, name) in admitted.items():
            if key not in claimed:  # cancelled meanwhile, or claimed by another server
                synthesis.close()
                if key in flights:
                    flights[key].land(None)
                continue
            self.generating[key] = synthesis
            task = asyncio.create_task(
                self.run_item(item, synthesis, name), name=f"job-item-{item.job_id}-{item.n}"
            )
            self.tasks.add(task)
            self.item_tasks[key] = task
            task.add_done_callback(self.tasks.discard)
            task.add_done_callback(functools.partial(self.forget_task, key))
            if key in flights:  # ended, its audio kept or not: identical items go on from there
                task.add_done_callback(functools.partial(self.landed, flights[key]))

    # ------------------------------------------------------------ one item

    async def run_item(self, item: Claimed, synthesis: Synthesis, name: str | None) -> None:
        key = item.key
        try:
            pieces = [piece async for piece in synthesis.pieces()]
            pcm = b"".join(piece.audio for piece in pieces)
            await words.item_words(item.request, self.svc.asr, synthesis, pcm,
                                   self.svc.settings.asr_timeout_s)  # fmt: skip
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
        await self.write(item, synthesis, pieces, name)

    async def write(
        self, item: Claimed, synthesis: Synthesis, pieces: list[Piece], name: str | None
    ) -> None:
        """Encode and store a finished item, and keep it in the result cache under `name`;
        from here on nothing cancels it."""
        pcm = b"".join(piece.audio for piece in pieces)
        try:
            wanted = delivery.profile(synthesis.request)
            data = await service.encode_whole(item.format, pcm, pieces[0].sample_rate, wanted)
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
        unheard = synthesis.verdict.asr_skipped  # heard next time, not kept as heard
        if (
            name is not None
            and self.svc.results is not None
            and not self.space.waiting
            and not unheard
        ):
            rate = wanted.rate(item.format, pieces[0].sample_rate)
            meta = service.cache_meta(synthesis, item.format, rate, synthesis.verdict.summary())
            await asyncio.to_thread(self.svc.results.put, name, CachedResult(data, meta))
        beside = None
        if synthesis.captions:
            beside = {
                "srt": captions.srt(synthesis.segments).encode(),
                "vtt": captions.vtt(synthesis.segments).encode(),
            }
        qa = synthesis.verdict.summary()
        await self.store_result(item, data, synthesis.seed, synthesis.audio_s, beside, qa)

    async def store_result(
        self,
        item: Claimed,
        data: bytes,
        seed: int,
        audio_s: float,
        beside: dict[str, bytes] | None = None,
        qa: dict[str, Any] | None = None,
    ) -> None:
        """Write a result and end its item `done`; a full disk puts it back in the queue."""
        if self.space.waiting:  # the reserve's room is for recording items' ends: no write now
            log.info("jobs: item %s/%d goes back to the queue: waiting for space", *item.key)
            await self.record(item.key, None)
            return
        try:
            stored = await asyncio.to_thread(
                self.store.finish, item.key, item.format, data, seed, audio_s, beside, qa
            )
            if not stored:  # cancelled meanwhile, or taken over by another server
                log.info("jobs: item %s/%d: result not stored, the item is no longer ours to "
                         "finish", item.job_id, item.n)  # fmt: skip
        except StoreUnavailable as exc:  # the database is gone: the item runs again later
            log.error("jobs: item %s/%d: storing the result failed: %s", item.job_id, item.n, exc)
            self.storage_failed(exc)
            await self.record(item.key, None)
        except (OSError, sqlite3.Error) as exc:
            if out_of_space(
                exc
            ):  # back to the queue (or failed after its attempts); wait for space
                self.space.refused(len(data) + sum(map(len, (beside or {}).values())), exc)
                end = refused_item_end(item.attempts + 1, exc)  # this one counted at its claim
                log.info("jobs: item %s/%d: the disk is full: %s", item.job_id, item.n,
                         "back to the queue" if end is None else "failed")  # fmt: skip
                await self.record(item.key, end)
                return
            # The data directory gone, say: it fails, saying so.
            log.error("jobs: item %s/%d: writing the result failed: %s", item.job_id, item.n, exc)
            self.storage_failed(exc)
            await self.record(item.key, InsufficientStorage(f"writing the result failed: {exc}"))

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
