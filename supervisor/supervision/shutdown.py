"""How the pool ends: its one orderly stop, or giving up when its own loop keeps failing.

The stop: stop admitting, drain, then stop every sidecar. Work in flight gets up to drain_s
to finish; what still runs after that (or at once, after a second signal: `Pool.hurry`) is
SIGKILLed with its sidecar and fails. Sidecars that are idle are asked to shut down, and
SIGKILLed if they do not exit within stop_timeout_s.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from supervisor.errors import Unavailable
from supervisor.supervision.process import KillReason, SidecarState
from supervisor.supervision.slot import SlotState

if TYPE_CHECKING:
    from supervisor.supervision.pool import Pool

log = logging.getLogger("omnivoice.pool")

POLL_S = 0.1
EXIT_GRACE_S = 5.0  # beyond stop_timeout_s, for the loop to reap what it SIGKILLed


def give_up(pool: Pool, why: str) -> None:
    """The loop cannot go on: fail every task, queued or in flight, SIGKILL the sidecars, and
    set `all_failed`, so that the server exits non-zero (EXIT_ALL_FAILED) and systemd restarts
    it. Spinning on a broken loop would leave every request hanging."""
    log.critical("%s; failing all work and giving up", why)
    pool.broken = True
    error = Unavailable(f"the server hit an internal error ({why}); retry later", retry_after_s=60)
    pool.scheduler.close(error)
    pool.scheduler.capacity = 0
    pool.scheduler.fail_queued(error)
    for slot in pool.slots:
        if slot.session is not None:
            for batch in slot.session.batches:
                pool.scheduler.fail_batch(batch, error)
            pool.kill_sidecar(slot.session.process, KillReason.SHUTDOWN, why)
    pool.spares.kill_all()
    pool.all_failed.set()


async def drain(pool: Pool, drain_s: float) -> bool:
    """Wait until every admitted task has ended; False if drain_s passed or hurry came first."""
    if not pool.scheduler.unfinished:
        return True
    idle = asyncio.create_task(pool.scheduler.wait_until_idle(drain_s))
    hurry = asyncio.create_task(pool.hurried.wait())
    done, _ = await asyncio.wait((idle, hurry), return_when=asyncio.FIRST_COMPLETED)
    for task in (idle, hurry):
        task.cancel()
    return idle in done and idle.result()


async def stop_pool(pool: Pool, drain_s: float) -> None:
    pool.draining = True
    pool.scheduler.close(
        Unavailable("the server is shutting down", retry_after_s=max(1.0, drain_s))
    )
    began = pool.clock()
    if not (drained := await drain(pool, drain_s)):
        log.warning(
            "drain: over after %.1f s, %d task(s) unfinished",
            pool.clock() - began,
            len(pool.scheduler.unfinished),
        )
    pool.stopping = True
    pool.scheduler.fail_queued(Unavailable("the server shut down before this request ran"))
    for slot in pool.slots:
        proc = slot.process
        if proc is None:
            if slot.state is not SlotState.STOPPED:
                slot.change_state(SlotState.STOPPED)
        elif pool.hurried.is_set() or (proc.state is SidecarState.BUSY and not drained):
            # What it still runs will not be waited for: BUSY -> STOPPING now.
            pool.kill_sidecar(proc, KillReason.SHUTDOWN, "the drain is over")
        else:
            proc.stop(KillReason.SHUTDOWN, pool.settings.stop_timeout_s)
    await wait_for_exits(pool)
    await pool.spares.close()
    if pool.task is not None:
        pool.task.cancel()
        await asyncio.gather(pool.task, return_exceptions=True)
    for slot in pool.slots:  # the loop is gone: finish whatever it did not
        if slot.process is not None:
            slot.process.kill(KillReason.SHUTDOWN)
            await slot.process.close()
            pool.reap_sidecars()
    log.info("pool stopped")


async def wait_for_exits(pool: Pool) -> None:
    """Let the loop reap every sidecar (bounded); a hurry meanwhile SIGKILLs them all."""
    deadline = time.monotonic() + pool.settings.stop_timeout_s + EXIT_GRACE_S
    hurried = pool.hurried.is_set()
    while any(s.process is not None for s in pool.slots) and time.monotonic() < deadline:
        if pool.task is not None and pool.task.done():
            return  # the loop gave up: nothing reaps any more
        if pool.hurried.is_set() and not hurried:
            hurried = True
            for slot in pool.slots:
                if slot.process is not None and slot.process.state is not SidecarState.DEAD:
                    pool.kill_sidecar(slot.process, KillReason.SHUTDOWN, "told to stop at once")
        pool.wake()
        await asyncio.sleep(POLL_S)
