"""Real sidecars for the fault tests: a pool of one CPU sidecar with short deadlines.

Everything here drives real processes: the sidecar on the tiny checkpoint (or the null engine
where a test is about the supervisor alone), killed and stopped with real signals. Its entry
point is the test one, whose hooks honour fault markers (tests/conftest.py, `faulty_sidecars`);
their tokens must lie under the system's temporary directory, where pytest's tmp_path is.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Any

import psutil

from supervisor.settings import Settings
from supervisor.supervision.gpu import CPU
from supervisor.supervision.pool import Pool
from supervisor.supervision.process import SidecarProcess
from supervisor.supervision.scheduler import Scheduler
from tests.helpers.waits import async_wait_until

SPAWN_S = 60.0  # generous bound for one real sidecar to load on a busy 2-core machine


def run(scenario: Coroutine[Any, Any, None], timeout_s: float = 180.0) -> None:
    asyncio.run(asyncio.wait_for(scenario, timeout_s))


def fast_settings(checkpoint: Path | None, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "model": str(checkpoint) if checkpoint else "",
        "engine": "omnivoice" if checkpoint else "null",
        "warmup_steps": 1,
        "num_step": 4,
        "load_timeout_s": SPAWN_S,
        "load_total_s": SPAWN_S * 2,
        "heartbeat_timeout_s": 3.0,
        "ping_interval_s": 60.0,
        "ping_timeout_s": 5.0,
        "stop_timeout_s": 5.0,
        "backoff_initial_s": 0.1,
        "backoff_max_s": 0.5,
        "restart_window_s": 300.0,
        "memory_reclaim_s": 5.0,
        "max_batch_latency_ms": 0.0,
        "compile_cache_dir": "off",  # not in the user's state directory; tests pass their own
        "spare_sidecars": "off",  # a second process per device: only the tests of spares
    }
    values.update(overrides)
    return Settings(**values)


async def wait_for(predicate: Callable[[], bool], timeout_s: float, what: str) -> float:
    """Poll until predicate() holds; fail naming `what` after timeout_s. Returns the time taken."""
    start = time.monotonic()
    await async_wait_until(predicate, timeout_s, what)
    return time.monotonic() - start


def items(*texts: str) -> list[dict[str, Any]]:
    return [{"id": f"item{i}", "text": text, "seed": i} for i, text in enumerate(texts)]


async def outcomes(pool: Pool, batch: list[dict[str, Any]], bound_s: float) -> list[Any]:
    """Submit and wait; every request must end (result or error) within bound_s."""
    futures = pool.scheduler.submit(batch)
    done = await asyncio.wait_for(asyncio.gather(*futures, return_exceptions=True), bound_s)
    return list(done)


def process(pool: Pool) -> SidecarProcess:
    proc = pool.slots[0].process
    assert proc is not None, f"no sidecar running: {pool.health()}"
    return proc


def is_ready(pool: Pool) -> bool:
    return pool.slots[0].public_state == "ready"


def mid_batch(pool: Pool) -> bool:
    session = pool.slots[0].session
    return session is not None and bool(session.batches) and session.batches[0].started


def sidecar_children() -> list[psutil.Process]:
    found = []
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if "sidecar" in child.cmdline() and child.status() != psutil.STATUS_ZOMBIE:
                found.append(child)
    return found


def assert_gone(pids: list[int]) -> None:
    alive = []
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
    assert not alive, f"sidecar processes left behind: {alive}"


@contextlib.asynccontextmanager
async def running_pool(settings: Settings, wait_ready: bool = True) -> AsyncIterator[Pool]:
    """A started pool with one CPU sidecar; on the way out it is stopped and every sidecar it
    ever started must be gone, with no child process left."""
    pool = Pool(settings.supervision, Scheduler(settings.scheduling), [CPU])
    await pool.start()
    try:
        if wait_ready:
            await wait_for(lambda: is_ready(pool), SPAWN_S, "the first sidecar to be ready")
        yield pool
    finally:
        await pool.stop(0)
        assert_gone(pool.slots[0].pids)
        assert sidecar_children() == []


def kill(pid: int, sig: int) -> None:
    os.kill(pid, sig)
