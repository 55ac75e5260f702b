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
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from supervisor import formats, schemas
from supervisor.api import Services
from supervisor.voice_store import resolve_voice, voice_resolver
from supervisor.errors import Overloaded, ServerError, SidecarLost, Unavailable
from supervisor.jobs import Claimed, JobStore
from supervisor.scheduler import Priority
from supervisor.synthesis import Synthesis
from supervisor.text import captions

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
        self.tasks: set[asyncio.Task[None]] = set()
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def wake(self) -> None:
        self._wakeup.set()

    async def start(self) -> None:
        done, queued = await asyncio.to_thread(self.store.recover)
        if done or queued:
            log.info("jobs: after the last stop, %d item(s) found finished, %d to run again", done, queued)
        self._task = asyncio.create_task(self.run(), name="jobs")

    async def run(self) -> None:
        next_sweep = 0.0
        while True:
            try:
                await asyncio.wait_for(self._wakeup.wait(), TICK_S)
            except asyncio.TimeoutError:
                pass
            self._wakeup.clear()
            try:
                if self.svc.pool.draining:
                    self.close_all()
                    continue
                if self.svc.settings.job_retention_s > 0 and time.monotonic() >= next_sweep:
                    next_sweep = time.monotonic() + SWEEP_EVERY_S
                    removed = await asyncio.to_thread(self.store.sweep, self.svc.settings.job_retention_s)
                    if removed:
                        log.info("jobs: removed %d job(s) past their retention", len(removed))
                await self.start_items()
            except asyncio.CancelledError:
                raise
            except Exception:  # a bug here must not stop the jobs for good
                log.exception("job runner pass failed")

    # ------------------------------------------------------------ starting items

    def room(self) -> int:
        s, scheduler = self.svc.settings, self.svc.scheduler
        if scheduler.closed is not None or scheduler.capacity < 1 or self.over_share():
            return 0
        return s.max_batch_size * scheduler.capacity * WINDOW_BATCHES - len(self.generating)

    def over_share(self) -> bool:
        scheduler = self.svc.scheduler
        return scheduler.admitted_audio_s >= self.svc.settings.max_queue_audio_s * scheduler.capacity * BULK_SHARE

    def prepare(self, item: Claimed) -> Synthesis:
        """The item as a speech request, admitted at bulk priority; raises as the speech route would."""
        fields = {key: value for key, value in item.request.items() if key != "captions"}
        speech = schemas.speech_request(fields, self.svc.settings)
        voice = resolve_voice(speech, self.svc.voices)
        voices = voice_resolver(speech, self.svc.voices)
        lexicon = self.svc.lexicons.for_request(speech)
        return Synthesis(self.svc.scheduler, speech, voice, self.svc.settings.chunk_s, Priority.BULK, voices, lexicon,
                         captions=item.request.get("captions") is True)  # fmt: skip

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
            except Exception as exc:  # a bug must not leave the item at the head of the queue for ever
                log.exception("jobs: item %s/%d cannot be prepared", item.job_id, item.n)
                await asyncio.to_thread(self.store.fail, item.key, ServerError(f"the item cannot be run: {exc!r}"), False)
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
            task = asyncio.create_task(self.run_item(item, synthesis), name=f"job-item-{item.job_id}-{item.n}")
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    # ------------------------------------------------------------ one item

    async def run_item(self, item: Claimed, synthesis: Synthesis) -> None:
        key = item.key
        try:
            pieces = [piece async for piece in synthesis.pieces()]
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # the runner is stopping: `recover` puts the item back at the next start
            # Our synthesis was closed: its job was cancelled (release ends it `cancelled`) or the server drains.
            await asyncio.to_thread(self.store.release, key)
            return
        except (Overloaded, Unavailable, SidecarLost) as exc:  # not the item's fault: it runs again
            log.info("jobs: item %s/%d goes back to the queue: %s", item.job_id, item.n, exc.message)
            await asyncio.to_thread(self.store.release, key)
            return
        except ServerError as exc:
            log.info("jobs: item %s/%d failed: %s", item.job_id, item.n, exc.message)
            await asyncio.to_thread(self.store.fail, key, exc)
            return
        except Exception as exc:  # a bug: the item fails with it rather than staying `running` until a restart
            log.exception("jobs: item %s/%d", item.job_id, item.n)
            await asyncio.to_thread(self.store.fail, key, ServerError(f"internal error: {exc!r}"))
            return
        finally:
            self.generating.pop(key, None)
            self.wake()
        await self.write(item, synthesis, pieces)

    async def write(self, item: Claimed, synthesis: Synthesis, pieces: list[dict[str, Any]]) -> None:
        """Encode and store a finished item; from here on nothing cancels it."""
        pcm = b"".join(piece["audio"] for piece in pieces)
        try:
            data = await asyncio.to_thread(formats.encode, item.format, pcm, pieces[0]["sample_rate"])
        except Exception as exc:  # libav refusing the audio is this item's failure, not the runner's
            log.exception("jobs: item %s/%d could not be encoded as %s", item.job_id, item.n, item.format)
            await asyncio.to_thread(self.store.fail, item.key, ServerError(f"encoding the audio as {item.format} failed: {exc}"))
            return
        try:
            beside = {"srt": captions.srt(synthesis.segments).encode(), "vtt": captions.vtt(synthesis.segments).encode()}
            await asyncio.to_thread(self.store.finish, item.key, item.format, data, synthesis.seed, synthesis.audio_s,
                                    beside if synthesis.captions else None)  # fmt: skip
        except OSError as exc:  # disk full, data directory gone: the item fails with the reason
            log.error("jobs: the result of item %s/%d cannot be written: %s", item.job_id, item.n, exc)
            await asyncio.to_thread(self.store.fail, item.key, ServerError(f"writing the result failed: {exc}"))

    # ------------------------------------------------------------ cancelling and stopping

    def cancel_job(self, job_id: str) -> None:
        """After the store cancelled a job: close what of it is still being generated."""
        for key, synthesis in list(self.generating.items()):
            if key[0] == job_id:
                synthesis.close()  # run_item releases it; the store ends it `cancelled`

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
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)
