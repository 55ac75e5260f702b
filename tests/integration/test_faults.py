"""The fault matrix: real sidecars on the tiny checkpoint, real faults.

Each test checks that every request ends within a bound, that the requests the fault did not
concern succeed, that the sidecar is replaced (or, where nothing was wrong with it, kept), and,
through `running_pool`, that no process is left behind.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from pathlib import Path

import pytest

from sidecar.devtools.faults import LOAD_ENV
from supervisor.errors import InvalidRequest, PoisonRequest, TaskFailed, Unavailable
from tests.helpers.harness import (
    SPAWN_S,
    fast_settings,
    is_ready,
    items,
    mid_batch,
    outcomes,
    process,
    run,
    running_pool,
    wait_for,
)

BOUND_S = 120.0  # every request of a scenario ends within this, respawns included


def succeeded(result: object) -> bool:
    return isinstance(result, dict) and result["op"] == "result" and len(result["audio"]) > 0


@pytest.fixture
def token(tmp_path: Path) -> str:
    """A one-shot fault token: the first sidecar or batch to delete it fires the fault."""
    path = tmp_path / "fault-token"
    path.touch()
    return str(path)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSTOP], ids=["sigkill", "sigstop"])
def test_signal_mid_batch_requeues_bystanders(checkpoint_dir: Path, sig: signal.Signals) -> None:
    """SIGKILL: the exit is seen at once. SIGSTOP (a wedge): no frame for the heartbeat
    deadline, then SIGKILL. Either way the whole batch runs again on a fresh sidecar."""

    async def scenario() -> None:
        settings = fast_settings(checkpoint_dir)
        async with running_pool(settings) as pool:
            first = process(pool).pid
            batch = asyncio.ensure_future(
                outcomes(
                    pool,
                    items("A slow one. [[fault:slow:2]]", "Bystander one.", "Bystander two."),
                    BOUND_S,
                )
            )
            await wait_for(lambda: mid_batch(pool), 30, "the batch to start")
            os.kill(first, sig)
            signalled = time.monotonic()
            await wait_for(lambda: pool.slots[0].kills, 30, "the kill")
            detected = time.monotonic() - signalled
            results = await batch
            assert all(succeeded(r) for r in results), results
            slot = pool.slots[0]
            reason = "exited" if sig == signal.SIGKILL else "heartbeat_timeout"
            assert dict(slot.kills) == {reason: 1} and slot.restarts == 1
            assert pool.health()["sidecars"][0]["last_kill"] == reason
            if sig == signal.SIGSTOP:
                assert (
                    settings.heartbeat_timeout_s - 0.5 < detected < settings.heartbeat_timeout_s + 5
                )
            await wait_for(lambda: is_ready(pool), SPAWN_S, "the replacement")
            assert process(pool).pid != first

    run(scenario())


def test_dies_while_loading(
    checkpoint_dir: Path, token: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LOAD_ENV, f"crash@{token}")

    async def scenario() -> None:
        async with running_pool(fast_settings(checkpoint_dir)) as pool:
            slot = pool.slots[0]
            assert dict(slot.kills) == {"exited": 1} and slot.restarts == 1 and len(slot.pids) == 2
            assert "status 70" in (slot.last_error or "")
            assert all(
                succeeded(r) for r in await outcomes(pool, items("After the crash."), BOUND_S)
            )

    run(scenario())


def test_never_finishes_loading(token: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A load that goes silent is killed at the load deadline. The null engine loads without a
    gap between progress frames, so the deadline can be short."""
    monkeypatch.setenv(LOAD_ENV, f"hang@{token}")

    async def scenario() -> None:
        async with running_pool(fast_settings(None, load_timeout_s=1.0)) as pool:
            slot = pool.slots[0]
            assert dict(slot.kills) == {"load_timeout": 1} and len(slot.pids) == 2
            assert "silent" in (slot.last_error or "")
            assert all(
                succeeded(r) for r in await outcomes(pool, items("After the hang."), BOUND_S)
            )

    run(scenario())


def test_stdout_from_inside_the_model_is_harmless(checkpoint_dir: Path) -> None:
    async def scenario() -> None:
        async with running_pool(fast_settings(checkpoint_dir)) as pool:
            first = process(pool).pid
            results = await outcomes(
                pool, items("Chatty library. [[fault:stdout]]", "A quiet one."), BOUND_S
            )
            assert all(succeeded(r) for r in results)
            assert pool.slots[0].kills == {} and process(pool).pid == first

    run(scenario())


@pytest.mark.parametrize(
    ("fault", "detail"), [("garbage", "undecodable frame"), ("oversize", "over the")]
)
def test_malformed_frame_kills_the_sidecar(
    checkpoint_dir: Path, token: str, fault: str, detail: str
) -> None:
    """A frame that does not decode, or one announced over the cap: protocol error, SIGKILL,
    nothing more is read from that pipe, and the batch runs again on a fresh sidecar."""

    async def scenario() -> None:
        async with running_pool(fast_settings(checkpoint_dir)) as pool:
            first = process(pool).pid
            results = await outcomes(
                pool, items(f"Bad frames. [[fault:{fault}@{token}]]", "Bystander."), BOUND_S
            )
            assert all(succeeded(r) for r in results), results
            slot = pool.slots[0]
            assert dict(slot.kills) == {"protocol_error": 1}
            assert detail in (slot.last_error or "")
            await wait_for(lambda: is_ready(pool), SPAWN_S, "the replacement")
            assert process(pool).pid != first

    run(scenario())


def test_exception_or_oom_inside_a_batch_fails_only_what_it_must(checkpoint_dir: Path) -> None:
    """The sidecar splits a failing batch and retries the halves: an item that raises fails
    alone, an out-of-memory that a smaller batch avoids fails nobody, and the sidecar stays."""

    async def scenario() -> None:
        async with running_pool(fast_settings(checkpoint_dir)) as pool:
            first = process(pool).pid
            raised = await outcomes(
                pool,
                items("It raises. [[fault:raise]]", "Good one.", "Good two.", "Good three."),
                BOUND_S,
            )
            assert isinstance(raised[0], TaskFailed) and "injected fault" in raised[0].message
            assert all(succeeded(r) for r in raised[1:])
            oom = await outcomes(
                pool, items("Too big together. [[fault:oom]]", "Good four."), BOUND_S
            )
            assert all(succeeded(r) for r in oom)
            bad_input = await outcomes(
                pool, [{"id": "x", "text": "Hi.", "instruct": "robotic squeaky"}], BOUND_S
            )
            assert bad_input[0].status == 400
            assert pool.slots[0].kills == {} and process(pool).pid == first

    run(scenario())


def test_poison_request_fails_alone_and_everyone_else_succeeds(checkpoint_dir: Path) -> None:
    async def scenario() -> None:
        async with running_pool(fast_settings(checkpoint_dir)) as pool:
            results = await outcomes(
                pool, items("Poison. [[fault:crash]]", "Bystander one.", "Bystander two."), BOUND_S
            )
            assert (
                isinstance(results[0], PoisonRequest)
                and "will not be retried" in results[0].message
            )
            assert all(succeeded(r) for r in results[1:])
            # in a batch, in the same batch again, then alone: three kills, and no fourth
            assert dict(pool.slots[0].kills) == {"exited": 3}
            await wait_for(lambda: is_ready(pool), SPAWN_S, "the replacement")
            assert all(succeeded(r) for r in await outcomes(pool, items("Afterwards."), BOUND_S))
            assert dict(pool.slots[0].kills) == {"exited": 3}

    run(scenario())


def test_idle_reaping_then_the_next_request_starts_one(checkpoint_dir: Path) -> None:
    async def scenario() -> None:
        async with running_pool(fast_settings(checkpoint_dir, idle_reap_s=1.0)) as pool:
            first = process(pool).pid
            await wait_for(lambda: pool.slots[0].public_state == "reaped", 15, "idle reaping")
            assert dict(pool.slots[0].kills) == {"idle": 1} and pool.slots[0].restarts == 0
            assert pool.is_ready() and pool.status() == "ok"  # a reaped sidecar is still capacity
            results = await outcomes(pool, items("Wake up."), BOUND_S)
            assert all(succeeded(r) for r in results)
            assert process(pool).pid != first

    run(scenario())


def test_ping_timeout_kills_a_wedged_idle_sidecar(checkpoint_dir: Path) -> None:
    async def scenario() -> None:
        async with running_pool(
            fast_settings(checkpoint_dir, ping_interval_s=0.5, ping_timeout_s=1.0)
        ) as pool:
            first = process(pool).pid
            os.kill(first, signal.SIGSTOP)
            await wait_for(lambda: pool.slots[0].kills, 10, "the ping deadline")
            assert dict(pool.slots[0].kills) == {"ping_timeout": 1}
            await wait_for(lambda: is_ready(pool), SPAWN_S, "the replacement")
            assert all(succeeded(r) for r in await outcomes(pool, items("Still here."), BOUND_S))

    run(scenario())


def test_restart_intensity_marks_the_device_failed(
    checkpoint_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LOAD_ENV, "crash")  # every sidecar dies while loading

    async def scenario() -> None:
        settings = fast_settings(checkpoint_dir, max_restarts=2)
        async with running_pool(settings, wait_ready=False) as pool:
            early = pool.scheduler.submit(items("Waiting for a sidecar that never comes."))
            await wait_for(
                lambda: pool.slots[0].public_state == "failed", 30, "the device to be marked failed"
            )
            slot = pool.slots[0]
            assert slot.restarts == 2 and dict(slot.kills) == {"exited": 3} and len(slot.pids) == 3
            assert "restart intensity" in (slot.last_error or "")
            assert pool.status() == "failed" and not pool.is_ready() and pool.all_failed.is_set()
            with pytest.raises(Unavailable):
                await asyncio.wait_for(early[0], 5)
            with pytest.raises(Unavailable):
                pool.scheduler.submit(items("Too late."))

    run(scenario())


def test_a_model_that_cannot_load_fails_at_once(
    checkpoint_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LOAD_ENV, "load-error")

    async def scenario() -> None:
        async with running_pool(fast_settings(checkpoint_dir), wait_ready=False) as pool:
            await wait_for(
                lambda: pool.slots[0].public_state == "failed", 30, "the device to be marked failed"
            )
            slot = pool.slots[0]
            assert slot.restarts == 0 and len(slot.pids) == 1
            assert "cannot be loaded" in (slot.last_error or "")

    run(scenario())


def test_text_that_cannot_be_sent_fails_alone_and_its_batch_is_answered(
    checkpoint_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 13.1: a lone surrogate that got past validation (put straight into the scheduler
    here) makes msgpack refuse the batch's frame. That task fails with a clear 400; the innocent
    ones in the same batch are sent again without it and answered; the sidecar is not touched."""

    async def scenario() -> None:
        async with running_pool(fast_settings(checkpoint_dir)) as pool:
            first = process(pool).pid
            results = await outcomes(
                pool, items("Innocent one.", "\ud800 hi", "Innocent two.", "Three."), BOUND_S
            )
            bad = results[1]
            assert isinstance(bad, InvalidRequest) and bad.status == 400, results
            assert "cannot be sent" in bad.message and "surrogate" in bad.message
            assert all(succeeded(r) for r in results[:1] + results[2:]), results
            assert pool.slots[0].kills == {} and process(pool).pid == first

    with caplog.at_level(logging.WARNING, logger="omnivoice.session"):
        run(scenario())
    # the bad task was in a batch with others, which went back to the queue
    assert any(
        "1 task(s) cannot be sent" in r.getMessage() and "re-queued" in r.getMessage()
        for r in caplog.records
    ), [r.getMessage() for r in caplog.records]


@pytest.mark.parametrize("attempt", range(5))
def test_one_crashing_request_among_three_costs_three_kills_every_time(
    checkpoint_dir: Path, attempt: int
) -> None:
    """Issue 13.5: the poison rule blamed an innocent request (and a fourth kill) when a task
    isolated to run alone had another batch pipelined behind it in the same sidecar. Run five
    times, since the race showed in about 2 of 8 runs: the crashing request is killed in a
    batch, in the batch again, then alone (three kills), and the three others always answer."""

    async def scenario() -> None:
        async with running_pool(fast_settings(checkpoint_dir)) as pool:
            texts = ["First innocent.", "Second innocent.", "Third innocent."]
            texts.insert(attempt % 4, "Poison. [[fault:crash]]")
            results = await outcomes(pool, items(*texts), BOUND_S)
            poisoned = attempt % 4
            assert isinstance(results[poisoned], PoisonRequest), results
            innocent = [r for i, r in enumerate(results) if i != poisoned]
            assert all(succeeded(r) for r in innocent), results
            assert dict(pool.slots[0].kills) == {"exited": 3}

    run(scenario())
