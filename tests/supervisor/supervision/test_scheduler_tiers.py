"""supervisor/supervision/scheduler.py: a request's `service_tier` reaches the scheduler as the
tier of its tasks, so a `flex` request waits behind interactive ones (ordering, not timers)."""

from __future__ import annotations

import asyncio
from typing import Any

from sidecar.shared.tiers import Tier
from supervisor.settings import Settings
from supervisor.speech.request import schemas
from supervisor.speech.request.voice import Voice
from supervisor.speech.synthesis.runner import SynthesisRun
from supervisor.supervision.scheduler import Scheduler
from tests.helpers.waits import async_wait_until

SETTINGS = Settings(engine="null", chunk_s=5.0)


def synthesis(scheduler: Scheduler, body: dict[str, Any], **options: Any) -> SynthesisRun:
    request = schemas.speech_request(body, SETTINGS.speech, **options)
    return SynthesisRun(scheduler, request, Voice(), SETTINGS.speech)


async def queued(scheduler: Scheduler, count: int) -> None:
    await async_wait_until(
        lambda: sum(len(queue) for queue in scheduler.queues.values()) >= count,
        10,
        f"{count} tasks queued",
    )


def test_a_flex_request_waits_behind_interactive_ones_sent_after_it() -> None:
    async def scenario() -> None:
        scheduler = Scheduler(Settings(engine="null", max_batch_size=1).scheduling)
        tiers = ["flex", "auto", "priority", "default", None]  # None: the field left out
        made = [
            synthesis(scheduler, {"input": f"Request {i}.", **({"service_tier": t} if t else {})})
            for i, t in enumerate(tiers)
        ]
        assert [s.tier for s in made] == [Tier.BULK] + [Tier.INTERACTIVE] * 4
        starts = [asyncio.ensure_future(anext(s.pieces())) for s in made]  # chunk 0 of each
        await queued(scheduler, len(made))
        owner = {s.id: name for s, name in zip(made, tiers)}
        order = []
        while (batch := scheduler.next_batch()) is not None:
            order += [owner[task.id.rsplit("-", 1)[0]] for task in batch.tasks]
        assert order == ["auto", "priority", "default", None, "flex"]
        for start, s in zip(starts, made):
            start.cancel()
            s.close()

    asyncio.run(asyncio.wait_for(scenario(), 10))


def test_a_flex_request_never_joins_a_running_bulk_batch() -> None:
    """Interactive work is sent at once beside bulk work (`next_join_batch`); flex work is not."""

    async def scenario() -> None:
        scheduler = Scheduler(Settings(engine="null").scheduling)
        flex = synthesis(scheduler, {"input": "Later.", "service_tier": "flex"})
        now = synthesis(scheduler, {"input": "Now.", "service_tier": "priority"})
        starts = [asyncio.ensure_future(anext(s.pieces())) for s in (flex, now)]
        await queued(scheduler, 2)
        batch = scheduler.next_join_batch()
        assert batch is not None and batch.tier is Tier.INTERACTIVE
        assert [task.id.rsplit("-", 1)[0] for task in batch.tasks] == [now.id]
        assert batch.frame()["tier"] == "interactive"  # type: ignore[typeddict-item]
        assert scheduler.next_join_batch() is None  # the flex task waits for its turn
        rest = scheduler.next_batch()
        assert rest is not None and rest.tier is Tier.BULK and rest.tasks[0].tier is Tier.BULK
        for start, s in zip(starts, (flex, now)):
            start.cancel()
            s.close()

    asyncio.run(asyncio.wait_for(scenario(), 10))


def test_a_job_item_is_flex_unless_it_names_a_tier() -> None:
    async def scenario() -> None:
        scheduler = Scheduler(Settings(engine="null").scheduling)
        job = schemas.JOB_TIER
        item = synthesis(scheduler, {"input": "An item."}, default_tier=job)
        urgent = synthesis(
            scheduler, {"input": "An item.", "service_tier": "priority"}, default_tier=job
        )
        assert (item.tier, urgent.tier) == (Tier.BULK, Tier.INTERACTIVE)
        item.close()
        urgent.close()

    asyncio.run(asyncio.wait_for(scenario(), 10))
