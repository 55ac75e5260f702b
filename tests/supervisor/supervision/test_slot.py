"""A slot's start when the spawn fails: short of a resource it backs off and tries again,
counted like any other restart; for any other reason the device fails.

The process is test_pool's FakeProcess (no child: these tests are about the slot's decision,
and a real EMFILE at spawn is made in tests/integration/test_connections.py), whose start
raises the OSError a spawn would.
"""

from __future__ import annotations

import errno
from collections.abc import Callable

import pytest

from supervisor.supervision.gpu import Device
from supervisor.supervision.process import FrameHandler
from supervisor.supervision.slot import SlotState
from tests.helpers.fake_pool import (
    READY,
    Arbiter,
    FakeProcess,
    fake_settings,
    run,
)


class FailingSpawn(FakeProcess):
    """A process whose spawn fails with `errno` while `failing` says so."""

    failing: int | None = None

    async def start(self) -> None:
        if FailingSpawn.failing is not None:
            raise OSError(FailingSpawn.failing, "spawn failed")
        await super().start()


class SpawnArbiter(Arbiter):
    def make(self, device: Device, on_frame: FrameHandler, wake: Callable[[], None]) -> FakeProcess:
        proc = FailingSpawn(device, on_frame, wake, self.clock)
        self.processes.append(proc)
        return proc


@pytest.mark.parametrize("code", [errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.EAGAIN])
def test_a_spawn_short_of_a_resource_backs_off_and_respawns(code: int) -> None:
    async def scenario() -> None:
        a = SpawnArbiter(fake_settings(max_restarts=5, backoff_initial_s=0.5))
        FailingSpawn.failing = code
        try:
            await a.tick()  # the first start fails
            slot = a.pool.slots[0]
            assert slot.state is SlotState.BACKOFF, slot.last_error
            assert slot.restarts == 1 and "spawn failed" in (slot.last_error or "")
            await a.tick()  # the first respawn is at once: it fails too, then 0.5 s
            assert slot.state is SlotState.BACKOFF and slot.restarts == 2
            assert slot.respawn_at == pytest.approx(a.clock.now + 0.5)
            FailingSpawn.failing = None  # the descriptors are back
            await a.tick(0.5)
            assert slot.state is SlotState.ACTIVE
            a.proc().frame(READY)
            assert slot.failures_in_row == 0 and a.pool.status() == "ok"
        finally:
            FailingSpawn.failing = None

    run(scenario())


def test_spawns_short_of_a_resource_still_reach_the_restart_intensity() -> None:
    async def scenario() -> None:
        a = SpawnArbiter(fake_settings(max_restarts=2, backoff_initial_s=0.5))
        FailingSpawn.failing = errno.EMFILE
        try:
            for _ in range(3):
                await a.tick(4.0)
            slot = a.pool.slots[0]
            assert slot.state is SlotState.FAILED
            assert "restart intensity reached" in (slot.last_error or "")
        finally:
            FailingSpawn.failing = None

    run(scenario())


def test_a_spawn_that_cannot_exec_fails_the_device() -> None:
    async def scenario() -> None:
        a = SpawnArbiter(fake_settings())
        FailingSpawn.failing = errno.ENOENT
        try:
            await a.tick()
            assert a.pool.slots[0].state is SlotState.FAILED
            assert a.pool.slots[0].restarts == 0
        finally:
            FailingSpawn.failing = None

    run(scenario())
