"""The pool's verbs on a fake clock with fake processes: deadlines, backoff, restart intensity,
idle reaping, isolation of poison suspects, and the loop's escalation, each in milliseconds.

The processes are fakes because these tests are about the arbiter's decisions, not about
signals or pipes: a `FakeProcess` is a real `SidecarProcess` whose start, send and signals are
recorded instead of done, and whose exit the test decides. The same behaviours are covered
with real sidecars in tests/integration/test_faults.py and tests/supervisor/supervision/test_pool_sidecars.py.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from sidecar.shared.protocol import Message, ProtocolError
from sidecar.shared.tiers import Tier
from supervisor.errors import Unavailable
from supervisor.supervision.pool import LOOP_FAILURE_LIMIT
from supervisor.supervision.process import KillReason, SidecarState
from supervisor.supervision.session import Session
from supervisor.supervision.slot import Slot, SlotState, backoff_delay
from tests.helpers.fake_pool import (
    CPU0,
    CPU1,
    READY,
    Arbiter,
    fake_settings,
    item,
    run,
)
from tests.helpers.waits import async_wait_until

# ---------------------------------------------------------------- deadlines


async def starting_silent(a: Arbiter) -> None:
    await a.tick(10.5)  # over load_timeout_s without a frame


async def starting_chatty_but_long(a: Arbiter) -> None:
    for _ in range(4):  # progress every 8 s: never silent for long, but 32 s > load_total_s
        await a.tick(8.0)
        a.proc().frame({"op": "progress", "stage": "loading"})
    await a.tick()


async def starting_in_time(a: Arbiter) -> None:
    await a.tick(9.5)


async def busy_silent(a: Arbiter) -> None:
    a.proc().frame(READY)
    a.scheduler.submit([item(0)])
    await a.tick()
    await a.tick(3.5)


async def busy_stepping(a: Arbiter) -> None:
    a.proc().frame(READY)
    a.scheduler.submit([item(0)])
    await a.tick()
    batch = a.session().batches[0].id
    for step in range(4):
        await a.tick(2.0)
        a.proc().frame({"op": "step", "batch": batch, "step": step, "of": 4})
    await a.tick()


async def idle_ping_unanswered(a: Arbiter) -> None:
    a.proc().frame(READY)
    await a.tick(5.0)  # ping_interval_s: a ping goes out
    assert a.proc().sent[-1] == {"op": "ping", "nonce": 1}
    await a.tick(2.5)


async def idle_ping_answered(a: Arbiter) -> None:
    a.proc().frame(READY)
    await a.tick(5.0)
    a.proc().frame({"op": "pong", "nonce": 1, "memory": {}})
    await a.tick(2.5)


async def idle_stale_pong(a: Arbiter) -> None:
    a.proc().frame(READY)
    await a.tick(5.0)
    a.proc().frame({"op": "pong", "nonce": 0, "memory": {}})  # not the nonce it was sent
    await a.tick(2.5)


async def stopping_too_long(a: Arbiter) -> None:
    a.proc().frame(READY)
    a.proc().stop(KillReason.IDLE, 4.0)
    await a.tick(4.5)


@pytest.mark.parametrize(
    ("scenario", "expected"),
    [
        (starting_silent, KillReason.LOAD_TIMEOUT),
        (starting_chatty_but_long, KillReason.LOAD_TIMEOUT),
        (starting_in_time, None),
        (busy_silent, KillReason.HEARTBEAT_TIMEOUT),
        (busy_stepping, None),
        (idle_ping_unanswered, KillReason.PING_TIMEOUT),
        (idle_ping_answered, None),
        (idle_stale_pong, KillReason.PING_TIMEOUT),
        (stopping_too_long, KillReason.IDLE),
    ],
)
def test_deadlines(
    scenario: Callable[[Arbiter], Coroutine[Any, Any, None]], expected: KillReason | None
) -> None:
    async def body() -> None:
        a = await Arbiter(fake_settings()).started(ready=False)
        await scenario(a)
        proc = a.processes[0]
        assert (proc.kill_reason if proc.signals else None) is expected
        assert proc.signals == ([signal.SIGKILL] if expected else [])

    run(body())


# ---------------------------------------------------------------- backoff and restart intensity


@pytest.mark.parametrize(
    ("failures", "delay"), [(1, 0.0), (2, 0.5), (3, 1.0), (4, 2.0), (5, 4.0), (9, 4.0)]
)
def test_backoff_doubles_up_to_its_cap(failures: int, delay: float) -> None:
    assert backoff_delay(fake_settings().supervision, failures) == delay


def test_respawns_wait_for_the_backoff_and_a_ready_sidecar_resets_it() -> None:
    async def body() -> None:
        a = await Arbiter(fake_settings()).started()
        spawned_at = []
        for expected_delay in (0.0, 0.5, 1.0, 2.0):
            a.processes[-1].exit(1)
            await a.tick()
            slot = a.pool.slots[0]
            if expected_delay:
                assert slot.state is SlotState.BACKOFF
                await a.tick(expected_delay - 0.01)
                assert slot.state is SlotState.BACKOFF and slot.session is None
                await a.tick(0.01)
            assert slot.state is SlotState.ACTIVE
            spawned_at.append(a.clock.now)
        assert len(a.processes) == 5 and a.pool.slots[0].restarts == 4
        a.processes[-1].frame(READY)  # loaded: the next death respawns at once again
        a.processes[-1].exit(1)
        await a.tick()
        assert a.pool.slots[0].state is SlotState.ACTIVE and len(a.processes) == 6

    run(body())


@pytest.mark.parametrize(
    ("deaths_at", "failed"),
    [
        ([0, 1, 2, 3, 4], False),  # five restarts within the window: allowed
        ([0, 1, 2, 3, 4, 5], True),  # the sixth is one too many
        ([0, 10, 20, 30, 40, 61], False),  # the first one has left the 60 s window
        ([0, 10, 20, 30, 40, 59], True),
    ],
)
def test_restart_intensity(deaths_at: list[float], failed: bool) -> None:
    settings = fake_settings()
    slot = Slot(CPU0, state=SlotState.ACTIVE)
    for at in deaths_at:
        if slot.state is SlotState.BACKOFF:
            slot.change_state(SlotState.ACTIVE)
        slot.record_death(settings.supervision, 1000.0 + at, 1)
    assert (slot.state is SlotState.FAILED) is failed
    if failed:
        assert "restart intensity reached" in (slot.last_error or "")


def test_a_load_error_fails_the_device_without_a_respawn() -> None:
    async def body() -> None:
        a = await Arbiter(fake_settings()).started(ready=False)
        a.proc().frame(
            {
                "op": "error",
                "batch": None,
                "id": None,
                "kind": "load_failed",
                "message": "no such checkpoint",
            }
        )
        a.proc().exit(3)
        await a.tick()
        slot = a.pool.slots[0]
        assert slot.state is SlotState.FAILED and len(a.processes) == 1
        assert "no such checkpoint" in (slot.last_error or "")
        assert a.pool.all_failed.is_set() and a.pool.status() == "failed"

    run(body())


# ---------------------------------------------------------------- idle reaping


@pytest.mark.parametrize(
    ("idle_reap_s", "min_warm", "idle_s", "work", "reaped"),
    [
        (10.0, 0, 10.0, False, True),
        (10.0, 0, 9.9, False, False),
        (0.0, 0, 1000.0, False, False),  # reaping off
        (10.0, 1, 10.0, False, False),  # the last warm one stays
        (10.0, 0, 10.0, True, False),  # work is waiting
    ],
)
def test_idle_reaping(
    idle_reap_s: float, min_warm: int, idle_s: float, work: bool, reaped: bool
) -> None:
    async def body() -> None:
        settings = fake_settings(idle_reap_s=idle_reap_s, min_warm=min_warm, ping_interval_s=1e6)
        a = await Arbiter(settings).started()
        if work:  # queued, and kept queued: this is about reaping, not dispatch
            a.pool.dispatch_batches = lambda: None  # type: ignore[method-assign]
            a.scheduler.submit([item(0)])
        await a.tick(idle_s)
        proc = a.processes[0]
        assert (proc.state is SidecarState.STOPPING) is reaped
        if reaped:
            assert proc.sent[-1] == {"op": "shutdown"} and proc.kill_reason is KillReason.IDLE
            proc.exit(0)
            await a.tick()
            assert a.pool.slots[0].state is SlotState.REAPED and a.pool.is_ready()
            assert a.pool.slots[0].kills == {"idle": 1}
            a.scheduler.submit([item(1)])  # work arrives: the slot starts a sidecar again
            await a.tick()
            assert a.pool.slots[0].state is SlotState.ACTIVE and len(a.processes) == 2

    run(body())


# ---------------------------------------------------------------- dispatch


def test_a_task_isolated_by_the_poison_rule_is_alone_in_its_sidecar() -> None:
    """Nothing is pipelined behind an isolated task, and it never goes ahead of a busy one."""

    async def body() -> None:
        a = await Arbiter(fake_settings(max_batch_size=1)).started()
        futures = a.scheduler.submit([item(0), item(1), item(2)])
        for task in list(a.scheduler.queues[Tier.INTERACTIVE])[:2]:
            task.kills = ["exited", "exited"]  # items 0 and 1 were in two killed batches
        await a.tick()
        session = a.session()
        assert [[t.id for t in b.tasks] for b in session.batches] == [["item0"]]
        answer(a, session.batches[0])
        await a.tick()
        assert [[t.id for t in b.tasks] for b in session.batches] == [["item1"]]
        answer(a, session.batches[0])
        await a.tick()  # item2 is not isolated: it may have company behind it again
        assert [[t.id for t in b.tasks] for b in session.batches] == [["item2"]]
        answer(a, session.batches[0])
        assert [f.result()["id"] for f in futures] == ["item0", "item1", "item2"]

    run(body())


def test_an_isolated_task_waits_for_an_idle_sidecar() -> None:
    async def body() -> None:
        a = await Arbiter(fake_settings(max_batch_size=1)).started()
        a.scheduler.submit([item(0)])
        await a.tick()
        [isolated] = a.scheduler.submit([item(1)])
        a.scheduler.queues[Tier.INTERACTIVE][0].kills = ["exited", "exited"]
        await a.tick()
        session = a.session()
        assert [[t.id for t in b.tasks] for b in session.batches] == [["item0"]]
        answer(a, session.batches[0])
        await a.tick()
        assert [[t.id for t in b.tasks] for b in session.batches] == [["item1"]]
        answer(a, session.batches[0])
        assert isolated.result()["id"] == "item1"

    run(body())


def sent_ids(session: Session) -> list[list[str]]:
    return [[t.id for t in b.tasks] for b in session.batches]


async def dispatched(a: Arbiter, advance_s: float = 0.0) -> None:
    """Ticks enough for every batch the pool will send now (a tick sends one per sidecar)."""
    await a.tick(advance_s)
    for _ in range(3):
        await a.tick()


def test_a_third_batch_goes_once_the_first_is_denoised_and_only_if_full() -> None:
    """Two batches wait for the device at most; a third is sent while the first decodes, so
    the device never waits for a decode, but only a full one: an overdue partial batch would
    take a late request's place."""

    async def body() -> None:
        # max_batch_latency_ms is 0 here: a partial batch is overdue as soon as it is queued.
        # Without light joins interactive batches run in turn, as every batch does under load.
        a = await Arbiter(fake_settings(max_batch_size=2, light_joins=False)).started()
        a.scheduler.submit([item(i) for i in range(7)])
        await dispatched(a)
        session = a.session()
        assert sent_ids(session) == [["item0", "item1"], ["item2", "item3"]]
        await dispatched(a)  # no third while neither is past the device
        assert len(session.batches) == 2
        a.proc().frame({"op": "denoised", "batch": session.batches[0].id})
        await dispatched(a)
        assert sent_ids(session)[2] == ["item4", "item5"]
        a.proc().frame({"op": "denoised", "batch": session.batches[1].id})
        await dispatched(a)  # three in flight: nothing more, though item6 is overdue
        assert len(session.batches) == 3
        answer(a, session.batches[0])
        await dispatched(a)  # the second is past the device too, but item6 alone is no full batch
        assert sent_ids(session) == [["item2", "item3"], ["item4", "item5"]]
        answer(a, session.batches[0])
        await dispatched(a)  # the second batch ahead: full or overdue, as before
        assert sent_ids(session) == [["item4", "item5"], ["item6"]]

    run(body())


def test_interactive_work_goes_to_an_idle_sidecar_before_it_joins_a_busy_one() -> None:
    """Two sidecars, one running bulk work: a new interactive request starts on the idle one
    rather than joining the bulk batch; the next one, with both busy, joins the bulk batch."""

    async def body() -> None:
        a = await Arbiter(fake_settings(max_batch_size=4), devices=(CPU0, CPU1)).started()
        a.scheduler.submit([item(0)], Tier.BULK)
        await dispatched(a)
        first, second = a.session(0), a.session(1)
        assert sent_ids(first) == [["item0"]] and sent_ids(second) == []
        a.scheduler.submit([item(1)])
        await dispatched(a)
        assert sent_ids(first) == [["item0"]] and sent_ids(second) == [["item1"]]
        assert second.batches[0].tier is Tier.BULK  # it found the sidecar idle: in turn
        a.scheduler.submit([item(2)])
        await dispatched(a)
        assert sent_ids(first) == [["item0"], ["item2"]]  # joined the bulk batch
        assert first.batches[1].tier is Tier.INTERACTIVE

    run(body())


def test_a_third_batch_is_never_partial() -> None:
    async def body() -> None:
        a = await Arbiter(fake_settings(max_batch_size=2, light_joins=False)).started()
        a.scheduler.submit([item(i) for i in range(5)])
        await dispatched(a)
        session = a.session()
        a.proc().frame({"op": "denoised", "batch": session.batches[0].id})
        await dispatched(a)
        assert sent_ids(session) == [["item0", "item1"], ["item2", "item3"]]
        answer(a, session.batches[0])
        await dispatched(a)
        assert sent_ids(session) == [["item2", "item3"], ["item4"]]

    run(body())


def test_a_denoised_frame_for_a_batch_it_does_not_hold_is_a_protocol_error() -> None:
    async def body() -> None:
        a = await Arbiter(fake_settings()).started()
        a.scheduler.submit([item(0)])
        await dispatched(a)
        with pytest.raises(ProtocolError, match="denoised for batch 999"):
            a.proc().frame({"op": "denoised", "batch": 999})

    run(body())


def test_a_killed_sidecar_requeues_all_three_batches_and_only_started_ones_count_as_run() -> None:
    async def body() -> None:
        a = await Arbiter(fake_settings(max_batch_size=1)).started()
        futures = a.scheduler.submit([item(i) for i in range(3)])
        await dispatched(a)
        session = a.session()
        a.proc().frame({"op": "denoised", "batch": session.batches[0].id})
        await dispatched(a)
        assert sent_ids(session) == [["item0"], ["item1"], ["item2"]]
        a.proc().frame({"op": "step", "batch": session.batches[1].id, "step": 1, "of": 32})
        a.proc().exit(-9)
        await dispatched(a)
        tasks = {t.id: t for t in a.scheduler.queues[Tier.INTERACTIVE]}
        assert sorted(tasks) == ["item0", "item1", "item2"] and not any(f.done() for f in futures)
        assert len(tasks["item0"].kills) == len(tasks["item1"].kills) == 1
        assert tasks["item2"].kills == []  # it never started: not a suspect

    run(body())


def answer(a: Arbiter, batch: Any) -> None:
    for task in batch.tasks:
        a.proc().frame(
            {
                "op": "result",
                "batch": batch.id,
                "id": task.id,
                "audio": b"",
                "encoding": "s16le",
                "sample_rate": 24000,
                "seed": 0,
                "tokens": [],
                "timings": {"audio_s": 1.0},
            }
        )
    a.proc().frame({"op": "done", "batch": batch.id, "stats": {}})


def test_a_frame_that_breaks_the_conversation_kills_nothing_but_raises() -> None:
    """Each is a ProtocolError, which the process reader turns into a protocol_error kill."""

    async def body() -> None:
        a = await Arbiter(fake_settings()).started()
        a.scheduler.submit([item(0)])
        await a.tick()
        batch = a.session().batches[0].id
        bad: list[Message] = [
            READY,  # ready twice
            {"op": "step", "batch": batch + 1, "step": 0, "of": 1},
            {"op": "done", "batch": batch, "stats": {}},  # no answer yet
            {"op": "error", "batch": batch, "id": "nobody", "kind": "internal", "message": "x"},
            {"op": "hello", "pid": 1, "protocol": 99},
            {"op": "ping", "nonce": 1},
        ]
        for message in bad:
            with pytest.raises(ProtocolError):
                a.proc().frame(message)

    run(body())


# ---------------------------------------------------------------- the loop's escalation


def test_a_loop_that_keeps_failing_gives_up_and_fails_everything() -> None:
    async def body() -> None:
        a = await Arbiter(fake_settings()).started()
        in_flight = a.scheduler.submit([item(0)])
        await a.tick()
        queued = a.scheduler.submit([item(1)])
        passes = 0

        def broken() -> None:
            nonlocal passes
            passes += 1
            a.pool.wake()  # no need to wait for the tick
            raise RuntimeError("a bug in a verb")

        a.pool.ping_idle_sidecars = broken  # type: ignore[method-assign]
        await asyncio.wait_for(a.pool.run(), 60)  # returns: it gave up
        assert passes == LOOP_FAILURE_LIMIT
        for future in in_flight + queued:
            assert isinstance(future.exception(), Unavailable)
        assert a.pool.all_failed.is_set() and a.pool.status() == "failed"
        assert a.processes[0].signals == [signal.SIGKILL]
        with pytest.raises(Unavailable):
            a.scheduler.submit([item(2)])

    run(body())


def test_failures_that_are_not_in_a_row_do_not_give_up() -> None:
    async def body() -> None:
        a = await Arbiter(fake_settings()).started()
        passes = 0

        def flaky() -> None:
            nonlocal passes
            passes += 1
            if passes < 3 * LOOP_FAILURE_LIMIT:  # then the loop waits on its tick: cancellable
                a.pool.wake()
            if passes % LOOP_FAILURE_LIMIT:  # every tenth pass succeeds
                raise RuntimeError("a bug that comes and goes")

        a.pool.ping_idle_sidecars = flaky  # type: ignore[method-assign]
        loop = asyncio.create_task(a.pool.run())
        await async_wait_until(  # generous: each pass is microseconds
            lambda: passes >= 3 * LOOP_FAILURE_LIMIT, 30, f"{3 * LOOP_FAILURE_LIMIT} loop passes"
        )
        assert not loop.done() and not a.pool.all_failed.is_set()
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)

    run(body())
