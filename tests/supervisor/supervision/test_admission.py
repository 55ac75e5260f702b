"""supervisor/supervision/admission.py through the scheduler: with API keys, one key's
interactive requests hold at most their share of the queue, and the others keep room; bulk work
and a server without keys are not bounded per key."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from sidecar.shared.tiers import Tier
from supervisor.errors import Overloaded
from supervisor.settings import Settings
from supervisor.supervision.admission import OwnerShares
from supervisor.supervision.scheduler import Scheduler

KEYS = ("sk-alice", "sk-bob")


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), 10))


def make(**overrides: Any) -> Scheduler:
    # A queue of 100 s of audio: one key may hold 50 s of it by default.
    return Scheduler(Settings(engine="null", max_queue_audio_s=100.0, **overrides).scheduling)


def item(name: str) -> dict[str, Any]:
    return {"id": name, "text": "A few words to say.", "duration": 30.0}


def test_one_key_is_refused_past_its_share_while_another_still_gets_in() -> None:
    async def scenario() -> None:
        s = make(api_keys=KEYS)
        first = s.reserve(30.0, "alice")
        s.reserve(30.0, "alice")  # admitted while alice holds less than her 50 s
        with pytest.raises(Overloaded) as refused:
            s.reserve(1.0, "alice")
        assert "this API key's requests hold 60 s" in str(refused.value)
        assert refused.value.retry_after_s > 0
        s.reserve(30.0, "bob")  # the queue (90 of 100 s) still has room for bob
        first.release()
        s.reserve(1.0, "alice")  # her released reservation made room for her again

    run(scenario)


def test_tasks_count_against_their_owner_until_they_end() -> None:
    async def scenario() -> None:
        s = make(api_keys=KEYS)
        futures = s.submit([item("a"), item("b")], Tier.INTERACTIVE, owner="alice")
        with pytest.raises(Overloaded):
            s.submit([item("c")], Tier.INTERACTIVE, owner="alice")
        for future in futures:
            future.cancel()
        await asyncio.sleep(0)  # the done callbacks run on the loop's next turn
        s.submit([item("c")], Tier.INTERACTIVE, owner="alice")

    run(scenario)


def test_bulk_work_is_not_bounded_per_key() -> None:
    async def scenario() -> None:
        s = make(api_keys=KEYS)
        s.submit([item("a"), item("b")], Tier.BULK, owner="alice")
        s.reserve(30.0, None)  # a job item's reservation counts against no key
        s.reserve(30.0, "alice")  # her interactive request: she holds nothing interactive yet

    run(scenario)


@pytest.mark.parametrize(
    "settings",
    [{}, {"api_keys": ("sk-only",)}, {"api_keys": KEYS, "max_queue_share_per_key": 1.0}],
    ids=["no keys", "one key", "share 1"],
)
def test_without_keys_with_one_or_with_a_share_of_one_only_the_queue_bounds(
    settings: dict[str, Any],
) -> None:
    async def scenario() -> None:
        s = make(**settings)
        for _ in range(4):  # the fourth at 90 s held: still below the queue's 100 s
            s.reserve(30.0, "default")
        with pytest.raises(Overloaded) as refused:  # at 120 s: the queue's own limit
            s.reserve(30.0, "default")
        assert "the limit is 100 s" in str(refused.value)

    run(scenario)


def test_the_books_forget_an_owner_with_nothing_left() -> None:
    shares = OwnerShares(0.5, keyed=True)
    shares.add("alice", 10.0)
    shares.add(None, 99.0)  # bulk: never counted
    shares.remove("alice", 10.0)
    shares.remove(None, 99.0)
    assert dict(shares.audio_s) == {}
