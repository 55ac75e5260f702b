"""Which queued items start in one pass of the job runner, and what each becomes.

An item is validated again as a speech request, its voice resolved, and it becomes a
`SynthesisRun` at its `service_tier` (`flex`, bulk, unless the item asks for another): the
scheduler puts every interactive task ahead of it. Room is bounded twice: by count (enough to
fill `WINDOW_BATCHES` batches per usable sidecar), and by admitted audio, of which job items may
take at most `BULK_SHARE` of the admission limit, so that interactive requests are still
admitted while a large job runs.

An item always has a seed (its own, its voice's, or one derived from its fields), so it is
looked up in the result cache first: one found there needs no synthesis. Identical items in
flight are made once (`single_flight`): an item whose cache key is being made by another stays
queued, and is found in the cache once that one is kept (or leads, if that one ended with
nothing kept).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Container

from supervisor.errors import Overloaded, ServerError, Unavailable
from supervisor.jobs.storage import Claimed, JobStorage, Key
from supervisor.services import Services
from supervisor.speech.checks import word_timestamps
from supervisor.speech.request import schemas
from supervisor.speech.request.schemas import SpeechRequest
from supervisor.speech.request.voice import Voice
from supervisor.speech.stores import result_cache
from supervisor.speech.stores.result_cache import CachedResult
from supervisor.speech.stores.single_flight import Flight, Flights
from supervisor.speech.synthesis import steps
from supervisor.speech.synthesis.runner import SynthesisRun
from supervisor.tenants import Tenant

log = logging.getLogger("omnivoice.jobs")

BULK_SHARE = 0.5  # most of the admission limit job items may hold
# Items in flight: this many full batches per usable sidecar, as many as a sidecar may hold
# (Session.room_ahead: one denoising, one in its pipe, one decoding).
WINDOW_BATCHES = 3


def room(svc: Services, generating: int) -> int:
    """How many more items may start now, `generating` being in flight."""
    scheduler = svc.scheduler
    if scheduler.closed is not None or scheduler.capacity < 1 or over_share(svc):
        return 0
    return svc.settings.scheduling.max_batch_size * scheduler.capacity * WINDOW_BATCHES - generating


def over_share(svc: Services) -> bool:
    scheduler = svc.scheduler
    limit = svc.settings.scheduling.max_queue_audio_s * scheduler.capacity * BULK_SHARE
    return scheduler.admitted_audio_s >= limit


def owner(svc: Services, item: Claimed) -> Tenant:
    """Whose the item's job is: its voices and lexicons are its API key's (supervisor.tenants)."""
    return svc.settings.tenancy.for_owner(item.owner)


def resolve(svc: Services, item: Claimed) -> tuple[SpeechRequest, Voice]:
    """The item as a speech request and its voice; raises as the speech route would. An item
    always has a seed (derived from its fields when it names none), so it is reproducible."""
    fields = {
        key: value for key, value in item.request.items() if key not in word_timestamps.ITEM_FIELDS
    }
    speech = schemas.speech_request(fields, svc.settings.speech, default_tier=schemas.JOB_TIER)
    voice = steps.voice(svc, owner(svc, item), speech)
    if speech.seed is None:
        # a title names the item; the same text under another title sounds the same
        spoken = {key: value for key, value in item.request.items() if key != "title"}
        seed = voice.seed if voice.seed is not None else result_cache.item_seed(spoken)
        speech = dataclasses.replace(speech, seed=seed)
    return speech, voice


def first_chunk_s(request: dict[str, object]) -> float | None:
    """The item's `first_chunk_s` (checked when the job was created), or None."""
    value = request.get("first_chunk_s")
    return float(value) if isinstance(value, (int, float)) else None


def cache_key(svc: Services, item: Claimed, speech: SpeechRequest, voice: Voice) -> str | None:
    """The item's result-cache entry; none for an item with captions (the cache keeps the
    audio alone) or one the cache cannot key (`result_cache.cacheable`)."""
    cache = svc.results
    if cache is None or item.request.get("captions") is True:
        return None
    if not result_cache.cacheable(speech):
        return None
    return result_cache.key(
        cache.identity,
        speech,
        voice,
        svc.settings.speech,
        "job",
        item.owner,
        first_chunk_s=first_chunk_s(item.request),
    )


class Intake:
    """One pass's items: those admitted, each with its synthesis and cache key, and those
    found in the result cache."""

    def __init__(self, svc: Services, store: JobStorage, flights: Flights) -> None:
        self.svc = svc
        self.store = store
        self.flights = flights
        self.admitted: dict[Key, tuple[Claimed, SynthesisRun, str | None]] = {}
        self.found: dict[Key, tuple[Claimed, CachedResult]] = {}
        self.leading: set[str] = set()  # the admitted items' cache keys

    def __bool__(self) -> bool:
        return bool(self.admitted or self.found)

    async def gather(self, items: list[Claimed], running: Container[Key]) -> None:
        """Take items in order while there is room; one that can no longer run fails."""
        for item in items:
            if item.key in running:  # ours still, its lease lost in an outage: not twice
                continue
            try:
                await self.take(item)
            except (Overloaded, Unavailable):
                break  # not now; it stays queued
            except ServerError as exc:  # no longer valid: a saved voice deleted, a limit lowered
                await asyncio.to_thread(self.store.fail, item.key, exc, False)
                continue
            except Exception as exc:  # a bug must not leave the item at the head of the queue
                log.exception("jobs: item %s/%d cannot be prepared", item.job_id, item.n)
                error = ServerError(f"the item cannot be run: {exc!r}")
                await asyncio.to_thread(self.store.fail, item.key, error, False)
                continue
            if over_share(self.svc):
                break

    async def take(self, item: Claimed) -> None:
        """The item found in the result cache, or admitted; or left queued while an identical
        one is being made."""
        speech, voice = resolve(self.svc, item)
        name = cache_key(self.svc, item, speech, voice)
        if name is not None and self.svc.results is not None:
            entry = await asyncio.to_thread(self.svc.results.get, name)
            if entry is not None:
                self.found[item.key] = (item, entry)
                return
        if name is not None and (self.flights.flying(name) or name in self.leading):
            return  # an identical item is being made: it stays queued until it is kept
        synthesis = await steps.start(
            self.svc,
            owner(self.svc, item),
            speech,
            voice,
            captions=item.request.get("captions") is True,
            first_chunk_s=first_chunk_s(item.request),
        )
        self.admitted[item.key] = (item, synthesis, name)
        if name is not None:
            self.leading.add(name)

    def lead(self) -> dict[Key, Flight]:
        """A flight for each admitted item with a cache key: identical ones wait for it."""
        return {key: self.flights.lead(name) for key, (_, _, name) in self.admitted.items() if name}

    def give_back(self, flights: dict[Key, Flight]) -> None:
        """None of it will run: the admitted audio given back, the flights landed empty."""
        for _, synthesis, _ in self.admitted.values():
            synthesis.close()
        for flight in flights.values():
            flight.land(None)
