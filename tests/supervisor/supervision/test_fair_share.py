"""supervisor/supervision/fair_share.py, through the scheduler: inside a tier owners (API keys)
take turns by the audio they have been served, so one key's queue holds another key's request
back by at most one batch (ordering, not timers)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from sidecar.shared.tiers import Tier
from supervisor.settings import Settings
from supervisor.speech.request import schemas
from supervisor.speech.request.voice import Voice
from supervisor.speech.synthesis.runner import SynthesisRun
from supervisor.supervision.scheduler import Scheduler
from tests.helpers.waits import async_wait_until


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), 10))


def item(name: str, duration: float = 2.0) -> dict[str, Any]:
    return {"id": name, "text": "A sentence of some length.", "duration": duration}


def submit(s: Scheduler, owner: str, names: list[str], **options: Any) -> None:
    tier = options.pop("tier", Tier.BULK)
    s.submit([item(n, **options) for n in names], tier, owner=owner)  # type: ignore[misc]


def batches(s: Scheduler) -> list[list[str]]:
    out = []
    while (batch := s.next_batch()) is not None:
        out.append([task.id for task in batch.tasks])
    return out


def test_a_long_queue_of_one_key_holds_another_keys_request_at_most_one_batch() -> None:
    async def scenario() -> None:
        s = Scheduler(Settings(engine="null", max_batch_size=4).scheduling)
        submit(s, "a", [f"a{i}" for i in range(12)])
        submit(s, "b", ["b0"])
        first, *_ = batches(s)
        assert first == ["a0", "b0", "a1", "a2"]  # first in, it would have been the fourth batch

    run(scenario)


def test_keys_take_turns_by_the_audio_they_were_served() -> None:
    async def scenario() -> None:
        s = Scheduler(Settings(engine="null", max_batch_size=1).scheduling)
        submit(s, "a", ["a0", "a1", "a2"], duration=8.0)
        submit(s, "b", [f"b{i}" for i in range(10)], duration=1.0)
        order = [ids[0] for ids in batches(s)]
        # One of a's 8-second tasks, then eight of b's 1-second ones, and so on.
        assert order[:11] == ["a0", *[f"b{i}" for i in range(8)], "a1", "b8"]

    run(scenario)


def test_a_key_that_arrives_late_gets_no_credit_for_the_work_before() -> None:
    async def scenario() -> None:
        s = Scheduler(Settings(engine="null", max_batch_size=1).scheduling)
        submit(s, "a", [f"a{i}" for i in range(8)])
        taken = [ids[0] for ids in (batches_of(s, 3))]
        assert taken == ["a0", "a1", "a2"]
        submit(s, "b", ["b0", "b1", "b2"])
        order = [ids[0] for ids in batches(s)]
        assert order[:6] == ["a3", "b0", "a4", "b1", "a5", "b2"]  # in turn, not b's three first

    run(scenario)


def batches_of(s: Scheduler, count: int) -> list[list[str]]:
    out = []
    for _ in range(count):
        batch = s.next_batch()
        assert batch is not None
        out.append([task.id for task in batch.tasks])
    return out


def test_tiers_come_before_shares() -> None:
    async def scenario() -> None:
        s = Scheduler(Settings(engine="null", max_batch_size=1).scheduling)
        submit(s, "a", ["a0", "a1"])
        submit(s, "b", ["b0"])
        submit(s, "a", ["now"], tier=Tier.INTERACTIVE)
        assert [ids[0] for ids in batches(s)] == ["now", "a0", "b0", "a1"]

    run(scenario)


def test_a_requests_tasks_carry_its_owner() -> None:
    """What `speech.synthesis.steps.start` hands the synthesis (its tenant's owner id) reaches each task."""

    async def scenario() -> None:
        settings = Settings(engine="null", chunk_s=5.0)
        s = Scheduler(settings.scheduling)
        request = schemas.speech_request({"input": "Mine."}, settings.speech)
        synthesis = SynthesisRun(s, request, Voice(), settings.speech, owner="key-a")
        start = asyncio.ensure_future(anext(synthesis.pieces()))
        await async_wait_until(lambda: s.queues[Tier.INTERACTIVE], 10, "the request's tasks")
        assert [task.owner for task in s.queues[Tier.INTERACTIVE]] == ["key-a"]
        start.cancel()
        synthesis.close()

    run(scenario)
