"""supervisor/supervision/scheduler.py: admission, batch forming, and the fate of a killed batch's tasks."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from sidecar.shared.tiers import Tier
from supervisor.errors import Overloaded, PoisonRequest, Unavailable
from supervisor.settings import Settings
from supervisor.supervision.scheduler import Scheduler
from supervisor.supervision.work import estimate


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), 10))


def make(**overrides: Any) -> Scheduler:
    return Scheduler(Settings(engine="null", **overrides).scheduling)


def item(name: str, words: int = 5, **extra: Any) -> dict[str, Any]:
    return {"id": name, "text": " ".join(["word"] * words) + ".", **extra}


def test_estimate_follows_the_duration_rule() -> None:
    audio_s, tokens = estimate(item("a", 10))
    assert 1.5 < audio_s < 4 and tokens > audio_s * 25
    assert estimate(item("b", 10, duration=7.0))[0] == 7.0
    assert estimate(item("c", 10, speed=2.0))[0] < audio_s


@pytest.mark.parametrize(
    ("cap", "budget", "sizes", "expected"),
    [
        (64, 10**6, [5, 5, 5], [3]),  # everything fits in one batch
        (2, 10**6, [5, 5, 5, 5, 5], [2, 2, 1]),  # the size cap
        (64, 200, [30, 30, 30], [1, 1, 1]),  # each item alone exceeds the budget
        (
            64,
            400,
            [30, 30, 5],
            [2, 1],
        ),  # a big one that does not fit is skipped, a smaller one fills in
        (64, 1, [5, 5], [1, 1]),  # one task always goes, even over the budget
    ],
)
def test_batches_respect_cap_and_token_budget(
    cap: int, budget: int, sizes: list[int], expected: list[int]
) -> None:
    async def scenario() -> None:
        s = make(max_batch_size=cap, max_batch_tokens=budget)
        s.submit([item(f"t{i}", n) for i, n in enumerate(sizes)])
        got = []
        while (batch := s.next_batch()) is not None:
            got.append(len(batch.tasks))
        assert got == expected

    run(scenario)


def test_interactive_goes_before_bulk() -> None:
    async def scenario() -> None:
        s = make(max_batch_size=2)
        s.submit([item("bulk1"), item("bulk2")], Tier.BULK)
        s.submit([item("now1")], Tier.INTERACTIVE)
        first = s.next_batch()
        assert first is not None and [t.id for t in first.tasks] == ["now1", "bulk1"]

    run(scenario)


def test_ahead_of_time_only_full_or_overdue() -> None:
    async def scenario() -> None:
        s = make(max_batch_size=2, max_batch_latency_ms=50)
        s.submit([item("a")])
        assert s.next_batch(ahead=True) is None  # one task, just arrived
        assert (
            s.next_batch(ahead=True, now=asyncio.get_running_loop().time() + 10) is not None
        )  # overdue
        s.submit([item("b"), item("c")])
        full = s.next_batch(ahead=True)
        assert full is not None and len(full.tasks) == 2

    run(scenario)


def test_only_full_refuses_an_overdue_partial_batch() -> None:
    async def scenario() -> None:
        s = make(max_batch_size=2, max_batch_latency_ms=50)
        s.submit([item("a")])
        later = asyncio.get_running_loop().time() + 10
        assert s.next_batch(ahead=True, only_full=True, now=later) is None  # overdue, not full
        s.submit([item("b")])
        full = s.next_batch(ahead=True, only_full=True)
        assert full is not None and [t.id for t in full.tasks] == ["a", "b"]

    run(scenario)


def test_queue_bound_gives_overloaded_with_retry_after() -> None:
    async def scenario() -> None:
        s = make(max_queue_audio_s=5)
        s.submit([item("first", 40)])  # admitted alone even though it exceeds the bound
        with pytest.raises(Overloaded) as caught:
            s.submit([item("second", 5)])
        assert caught.value.status == 429 and int(caught.value.headers()["Retry-After"]) >= 1

    run(scenario)


def test_closed_and_no_capacity_are_unavailable() -> None:
    async def scenario() -> None:
        s = make()
        s.capacity = 0
        with pytest.raises(Unavailable, match="every sidecar has failed"):
            s.submit([item("a")])
        s.capacity = 1
        s.close(Unavailable("draining"))
        with pytest.raises(Unavailable, match="draining"):
            s.submit([item("a")])

    run(scenario)


def test_bystanders_requeue_and_the_poison_runs_alone_then_fails() -> None:
    async def scenario() -> None:
        s = make()
        futures = s.submit([item("poison"), item("a"), item("b")])
        first = s.next_batch()
        assert first is not None and len(first.tasks) == 3
        s.requeue(first, "exited", ran=True)
        second = s.next_batch()
        assert second is not None and [t.id for t in second.tasks] == ["poison", "a", "b"]
        s.requeue(second, "exited", ran=True)
        # Each of them was in two killed batches: from now on each runs alone.
        alone = [s.next_batch() for _ in range(3)]
        assert [[t.id for t in b.tasks] for b in alone if b] == [["poison"], ["a"], ["b"]]
        s.requeue(alone[0], "exited", ran=True)  # the poison kills a sidecar by itself
        with pytest.raises(PoisonRequest, match="will not be retried"):
            await futures[0]
        for batch, future in zip(alone[1:], futures[1:]):
            s.resolve(batch.tasks[0], {"op": "result", "id": batch.tasks[0].id})
            assert await future == {"op": "result", "id": batch.tasks[0].id}
        assert s.next_batch() is None
        assert await s.wait_until_idle(1)

    run(scenario)


def test_a_batch_that_never_ran_is_requeued_unmarked() -> None:
    async def scenario() -> None:
        s = make()
        s.submit([item("a")])
        batch = s.next_batch()
        assert batch is not None
        for _ in range(3):
            s.requeue(batch, "exited", ran=False)
            again = s.next_batch()
            assert again is not None and again.tasks[0].kills == []
            batch = again

    run(scenario)


def test_a_first_solo_kill_is_retried() -> None:
    async def scenario() -> None:
        s = make()
        [future] = s.submit([item("a")])
        batch = s.next_batch()
        assert batch is not None
        s.requeue(batch, "heartbeat_timeout", ran=True)  # maybe not its fault: once more
        again = s.next_batch()
        assert again is not None
        s.requeue(again, "heartbeat_timeout", ran=True)
        with pytest.raises(PoisonRequest):
            await future

    run(scenario)


def test_cancelled_callers_leave_the_books() -> None:
    async def scenario() -> None:
        s = make()
        [future] = s.submit([item("a", 20)])
        assert s.admitted_audio_s > 0
        future.cancel()
        await asyncio.sleep(0)  # the done callbacks run on the loop's next turn: by then, gone
        assert s.admitted_audio_s == 0 and s.next_batch() is None
        assert await s.wait_until_idle(1)

    run(scenario)


def test_a_cancelled_task_leaves_the_queue_and_one_in_a_batch_is_dropped() -> None:
    """A timed-out or abandoned request's queued tasks leave the queue at once (not when a batch
    is next formed); one already in a batch gets its answer dropped, its batch-mates theirs."""

    async def scenario() -> None:
        s = make(max_batch_size=2)
        running = s.submit([item("mine"), item("other")])
        batch = s.next_batch()
        assert batch is not None and len(batch.tasks) == 2
        queued = s.submit([item("later 1"), item("later 2")])
        assert s.depth()["queued"] == 2
        for future in (running[0], *queued):
            future.cancel()
        await asyncio.sleep(0)  # the next turn: out of the queue before a batch is formed
        assert not any(s.queues.values()) and s.depth()["queued"] == 0
        for task in batch.tasks:
            s.resolve(task, {"op": "result", "id": task.id})
        assert await running[1] == {"op": "result", "id": "other"} and running[0].cancelled()
        await asyncio.sleep(0)  # the done callbacks run
        assert s.admitted_audio_s == 0 and await s.wait_until_idle(1)

    run(scenario)


def test_fail_queued_ends_everything_waiting() -> None:
    async def scenario() -> None:
        s = make()
        futures = s.submit([item("a"), item("b")])
        s.fail_queued(Unavailable("gone"))
        for future in futures:
            with pytest.raises(Unavailable):
                await future

    run(scenario)


def test_a_long_request_is_admitted_whenever_the_queue_has_room() -> None:
    """Below the limit any request gets in, however long; at or above it, even a short one waits.
    (Checking queued + incoming would refuse the long one for as long as short ones keep coming.)"""

    async def scenario() -> None:
        short_s, _ = estimate(item("short", 20))
        long_s, _ = estimate(item("long", 200))
        s = make(max_queue_audio_s=short_s + 1)
        s.submit([item("short", 20)])
        s.submit([item("long", 200)])  # room left, though short + long is far over the limit
        with pytest.raises(Overloaded):
            s.submit([item("another short", 20)])
        assert s.admitted_audio_s == pytest.approx(short_s + long_s)

    run(scenario)
