"""Interactive work beside a bulk batch, with real null-engine sidecars: the pool sends it at once
as a `join`, the sidecar merges it into the batch it is denoising at the next step, and it is
answered before that batch; a sidecar killed with a joined batch in it loses nothing.

A `slow` fault makes the bulk batch take seconds (each of its steps sleeps); with
`interactive_step_tokens` 0 the bulk batch waits while the interactive one runs. A `decodeslow`
fault keeps a denoised bulk batch in the sidecar's finisher: interactive work still joins (the
sidecar's interactive finisher answers it), rather than queueing behind that decode. A
`deviceslow` fault holds a bulk batch's `denoised` (the null engine has no device; the fault
stands in for a bulk batch the device has not finished): interactive work waits for it neither."""

from __future__ import annotations

import asyncio
import signal

from sidecar.shared.tiers import Tier
from supervisor.supervision.pool import Pool
from tests.helpers.harness import fast_settings, kill, process, run, running_pool, wait_for

BULK = {"id": "bulk", "text": "A long bulk read. [[fault:slow:4]]", "seed": 0, "num_step": 40}
URGENT = {"id": "urgent", "text": "Now, please.", "seed": 1, "num_step": 4}


def joined_batch_started(pool: Pool) -> bool:
    session = pool.slots[0].session
    return session is not None and any(
        b.tier is Tier.INTERACTIVE and b.started for b in session.batches
    )


def bulk_denoised(pool: Pool) -> bool:
    session = pool.slots[0].session
    return session is not None and any(b.denoised and b.tier is Tier.BULK for b in session.batches)


def bulk_started(pool: Pool) -> bool:
    session = pool.slots[0].session
    return session is not None and any(b.started and b.tier is Tier.BULK for b in session.batches)


def test_an_interactive_request_joins_a_running_bulk_batch_and_ends_first() -> None:
    async def scenario() -> None:
        async with running_pool(fast_settings(None, interactive_step_tokens=0)) as pool:
            [bulk] = pool.scheduler.submit([dict(BULK)], Tier.BULK)  # type: ignore[list-item]
            await wait_for(lambda: bulk_started(pool), 30, "the bulk batch to start")
            [urgent] = pool.scheduler.submit([dict(URGENT)])  # type: ignore[list-item]
            assert (await asyncio.wait_for(urgent, 30))["id"] == "urgent"
            assert not bulk.done(), "the interactive request waited for the bulk batch"
            assert (await asyncio.wait_for(bulk, 60))["id"] == "bulk"
            assert not pool.slots[0].kills

    run(scenario())


def test_a_sidecar_killed_with_a_joined_batch_in_it_loses_neither_batch() -> None:
    async def scenario() -> None:
        async with running_pool(fast_settings(None, interactive_step_tokens=0)) as pool:
            [bulk] = pool.scheduler.submit([dict(BULK)], Tier.BULK)  # type: ignore[list-item]
            await wait_for(lambda: bulk_started(pool), 30, "the bulk batch to start")
            slow = {**URGENT, "text": "Now, but slowly. [[fault:slow:3]]", "num_step": 30}
            [urgent] = pool.scheduler.submit([slow])  # type: ignore[list-item]
            await wait_for(lambda: joined_batch_started(pool), 30, "the joined batch to step")
            kill(process(pool).pid, signal.SIGKILL)
            results = await asyncio.wait_for(asyncio.gather(urgent, bulk), 120)
            assert [r["id"] for r in results] == ["urgent", "bulk"]
            assert pool.slots[0].kills

    run(scenario())


def test_an_interactive_request_does_not_wait_for_a_bulk_batch_to_decode() -> None:
    async def scenario() -> None:
        # The slow decode sends no frame for 8 s: the heartbeat deadline is raised above it.
        async with running_pool(fast_settings(None, heartbeat_timeout_s=30.0)) as pool:
            decoding = {**BULK, "text": "A bulk read. [[fault:decodeslow:8]]", "num_step": 4}
            [bulk] = pool.scheduler.submit([decoding], Tier.BULK)  # type: ignore[list-item]
            await wait_for(lambda: bulk_denoised(pool), 30, "the bulk batch to be denoised")
            [urgent] = pool.scheduler.submit([dict(URGENT)])  # type: ignore[list-item]
            assert (await asyncio.wait_for(urgent, 30))["id"] == "urgent"
            assert not bulk.done(), "the interactive request waited for the bulk decode"
            assert (await asyncio.wait_for(bulk, 60))["id"] == "bulk"

    run(scenario())


def test_interactive_requests_do_not_wait_for_a_bulk_batch_the_device_has_not_finished() -> None:
    """A `deviceslow` fault holds the bulk batch's `denoised` (its device work unfinished, as
    on a GPU whose bulk passes are long): interactive requests that join meanwhile are answered
    one after another, the second too, and the bulk batch is still not past the device."""

    async def scenario() -> None:
        async with running_pool(fast_settings(None, heartbeat_timeout_s=60.0)) as pool:
            held = {**BULK, "text": "A bulk read. [[fault:deviceslow:20]]", "num_step": 4}
            [bulk] = pool.scheduler.submit([held], Tier.BULK)  # type: ignore[list-item]
            await wait_for(lambda: bulk_started(pool), 30, "the bulk batch to start")
            for n in range(3):
                [urgent] = pool.scheduler.submit([{**URGENT, "id": f"urgent-{n}"}])  # type: ignore[list-item]
                assert (await asyncio.wait_for(urgent, 15))["id"] == f"urgent-{n}"
            assert not bulk_denoised(pool), "the interactive requests waited for the device"
            assert (await asyncio.wait_for(bulk, 60))["id"] == "bulk"

    run(scenario())


def in_turn_started(pool: Pool) -> bool:
    """A batch that runs in turn (`Tier.BULK` on the wire) has started, with interactive tasks."""
    session = pool.slots[0].session
    return session is not None and any(
        b.started and b.tier is Tier.BULK and b.tasks[0].tier is Tier.INTERACTIVE
        for b in session.batches
    )


def test_under_a_light_load_an_interactive_request_joins_a_running_interactive_batch() -> None:
    """With `--light-joins`, a short request sent while a slow interactive batch runs (no bulk
    work anywhere) joins it and is answered first; without, it waits for its turn."""

    async def scenario(light: bool) -> list[str]:
        async with running_pool(fast_settings(None, light_joins=light)) as pool:
            slow = {**BULK, "id": "slow", "text": "A slow read. [[fault:slow:4]]"}
            [first] = pool.scheduler.submit([slow])  # type: ignore[list-item]
            await wait_for(lambda: in_turn_started(pool), 30, "the slow batch to start")
            [urgent] = pool.scheduler.submit([dict(URGENT)])  # type: ignore[list-item]
            order: list[str] = []
            for done in asyncio.as_completed([first, urgent], timeout=60):
                order.append((await done)["id"])
            return order

    assert asyncio.run(asyncio.wait_for(scenario(True), 180)) == ["urgent", "slow"]
    assert asyncio.run(asyncio.wait_for(scenario(False), 180)) == ["slow", "urgent"]


def test_a_light_join_never_makes_the_batch_being_denoised_pass_the_step_budget() -> None:
    """The running batch already holds more estimated tokens than `--interactive-step-tokens`:
    the load is not light, so the short request runs in turn, after it (a saturated sidecar's
    full-size batches stay whole)."""

    async def scenario() -> list[str]:
        settings = fast_settings(None, light_joins=True, interactive_step_tokens=20)
        async with running_pool(settings) as pool:
            slow = {**BULK, "id": "slow", "text": "A slow read. [[fault:slow:3]]"}
            [first] = pool.scheduler.submit([slow])  # type: ignore[list-item]
            await wait_for(lambda: in_turn_started(pool), 30, "the slow batch to start")
            session = pool.slots[0].session
            assert session is not None and session.join_room(20) is None
            [urgent] = pool.scheduler.submit([dict(URGENT)])  # type: ignore[list-item]
            order: list[str] = []
            for done in asyncio.as_completed([first, urgent], timeout=60):
                order.append((await done)["id"])
            return order

    assert asyncio.run(asyncio.wait_for(scenario(), 180)) == ["slow", "urgent"]


def test_no_light_join_while_a_batch_waits_behind_the_one_being_denoised() -> None:
    """Two interactive batches in turn, one denoising and one in the sidecar's pipe: the queue
    is building, so the load is not light, whatever room the step budget would leave. (The
    pool's budget here is too small for any light join, so the second batch goes in turn.)"""

    async def scenario() -> None:
        settings = fast_settings(
            None, light_joins=True, interactive_step_tokens=1, max_batch_size=1
        )
        async with running_pool(settings) as pool:
            slow = [
                {**BULK, "id": f"slow-{n}", "text": f"Slow read {n}. [[fault:slow:3]]"}
                for n in range(2)
            ]
            [first] = pool.scheduler.submit([slow[0]])  # type: ignore[list-item]
            await wait_for(lambda: in_turn_started(pool), 30, "the first batch to start")
            session = pool.slots[0].session
            assert session is not None
            assert session.join_room(100_000) is not None  # alone, it would take a join
            [second] = pool.scheduler.submit([slow[1]])  # type: ignore[list-item]
            await wait_for(lambda: len(session.batches) == 2, 30, "the second batch sent")
            assert all(b.tier is Tier.BULK and not b.denoised for b in session.batches)
            assert session.join_room(100_000) is None
            results = await asyncio.wait_for(asyncio.gather(first, second), 60)
            assert [r["id"] for r in results] == ["slow-0", "slow-1"]

    run(scenario())
