"""A finished item's result: encoded, kept in the result cache, written to the job store.

How an item ends:

    in the result cache     that file written atomically, `done`
    all its audio           encoded (delivery profile applied), written atomically, `done`
                            (with its `qa` checks)
    audio failing a check   `failed` with code `qa_failed` and its `qa`, once retries ran out
    an error of the item    `failed`, with the error (bad input, a poison request, ...)
    not the item's fault    `queued` again: over capacity, draining, or no device left
    its job cancelled       `cancelled` (a synthesis already running is closed)

A full disk (supervisor/jobs/full_disk.py): a result that cannot be written for want of space puts
its item back in the queue (its attempt counted; after `FULL_DISK_ATTEMPTS` it fails with
`insufficient_storage`), the temporary file removed, and the runner waits for space: no item
starts until a probe finds room, then they run again by themselves. Another write error fails
the item, saying so; a database that cannot be reached puts the item back in the queue.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Awaitable, Callable

from supervisor.database import StoreUnavailable
from supervisor.errors import InsufficientStorage, ServerError
from supervisor.jobs.full_disk import FullDiskWait, refused_item_end
from supervisor.jobs.storage import Claimed, JobStorage, Key, out_of_space
from supervisor.qa_summary import QaSummary
from supervisor.services import Services
from supervisor.speech.audio import delivery
from supervisor.speech.audio.chunk_audio import ChunkAudio
from supervisor.speech.stores.result_cache import CachedResult
from supervisor.speech.synthesis import steps
from supervisor.speech.synthesis.runner import SynthesisRun
from supervisor.speech.text import captions

log = logging.getLogger("omnivoice.jobs")

# How the runner ends an item: failed with the error, or released (None).
Record = Callable[[Key, ServerError | None], Awaitable[None]]


class ResultWriter:
    """Writes finished items; an end it cannot write goes to `record`, a store that refuses
    to `storage_failed`."""

    def __init__(
        self,
        svc: Services,
        store: JobStorage,
        space: FullDiskWait,
        record: Record,
        storage_failed: Callable[[BaseException], None],
    ) -> None:
        self.svc = svc
        self.store = store
        self.space = space
        self.record = record
        self.storage_failed = storage_failed

    async def write(
        self, item: Claimed, synthesis: SynthesisRun, pieces: list[ChunkAudio], name: str | None
    ) -> None:
        """Encode and store a finished item, and keep it in the result cache under `name`;
        from here on nothing cancels it."""
        pcm = b"".join(piece.audio for piece in pieces)
        try:
            wanted = delivery.profile(synthesis.request)
            data = await steps.encode_whole(item.format, pcm, pieces[0].sample_rate, wanted)
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
            meta = steps.cache_meta(synthesis, item.format, rate, synthesis.verdict.summary())
            await asyncio.to_thread(self.svc.results.put, name, CachedResult(data, meta))
        beside = None
        if synthesis.captions:
            beside = {
                "srt": captions.srt(synthesis.segments).encode(),
                "vtt": captions.vtt(synthesis.segments).encode(),
            }
        qa = synthesis.verdict.summary()
        await self.store_result(item, data, synthesis.seed, synthesis.audio_s, beside, qa)

    async def write_found(self, item: Claimed, entry: CachedResult) -> None:
        """An item found in the result cache: its entry is the result."""
        meta = entry.meta
        qa = meta.get("qa")  # a job item's entry keeps its `qa` block
        await self.store_result(
            item,
            entry.data,
            meta["seed"],
            meta["audio_s"],
            qa=None if qa is None or isinstance(qa, str) else qa,
        )

    async def store_result(
        self,
        item: Claimed,
        data: bytes,
        seed: int,
        audio_s: float,
        beside: dict[str, bytes] | None = None,
        qa: QaSummary | None = None,
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
                log.info(
                    "jobs: item %s/%d: result not stored, the item is no longer ours to finish",
                    item.job_id,
                    item.n,
                )
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
                log.info(
                    "jobs: item %s/%d: the disk is full: %s",
                    item.job_id,
                    item.n,
                    "back to the queue" if end is None else "failed",
                )
                await self.record(item.key, end)
                return
            # The data directory gone, say: it fails, saying so.
            log.error("jobs: item %s/%d: writing the result failed: %s", item.job_id, item.n, exc)
            self.storage_failed(exc)
            await self.record(item.key, InsufficientStorage(f"writing the result failed: {exc}"))
