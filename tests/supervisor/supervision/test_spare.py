"""supervisor/supervision/spare.py with real sidecars: a spare parks, takes over after a kill,
is replaced when it dies unneeded, and goes with its device's sidecar when that is stopped."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from supervisor.supervision.pool import Pool
from tests.helpers.harness import (
    SPAWN_S,
    assert_gone,
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

BOUND_S = 120.0


@pytest.fixture(autouse=True)
def one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


def spare(pool: Pool) -> dict[str, Any] | None:
    entry: dict[str, Any] | None = pool.health()["sidecars"][0]["spare"]
    return entry


async def parked(pool: Pool, not_pid: int = 0) -> int:
    """Wait for a parked spare (another than `not_pid`); its pid."""

    def found() -> bool:
        entry = spare(pool)
        return entry is not None and entry["state"] == "parked" and entry["pid"] != not_pid

    await wait_for(found, SPAWN_S, "a parked spare")
    entry = spare(pool)
    assert entry is not None and entry["memory_bytes"] > 10 * 2**20  # a whole Python process
    return int(entry["pid"])


def test_a_kill_mid_batch_hands_the_device_to_the_parked_spare(checkpoint_dir: Path) -> None:
    """The model's spare: loaded on the host, parked, told to go after the kill. The batch the
    kill interrupted is answered whole by it, and it speaks as the first sidecar did."""

    async def scenario() -> None:
        async with running_pool(fast_settings(checkpoint_dir, spare_sidecars="on")) as pool:
            first = process(pool).pid
            again = {"id": "again", "text": "Same words, same seed.", "seed": 7}
            [before] = await outcomes(pool, [again], BOUND_S)
            waiting = await parked(pool)
            batch = [*items("A slow one. [[fault:slow:2]]", "Bystander one."), again]
            answered = asyncio.ensure_future(outcomes(pool, batch, BOUND_S))
            await wait_for(lambda: mid_batch(pool), 30, "the batch to start")
            os.kill(first, signal.SIGKILL)
            results = await answered
            assert [r["op"] for r in results] == ["result"] * 3, results
            assert process(pool).pid == waiting and pool.slots[0].pids == [first, waiting]
            assert dict(pool.slots[0].kills) == {"exited": 1}
            assert results[2]["audio"] == before["audio"]
            whole_start = pool.time_to_ready_s
            await wait_for(lambda: is_ready(pool), SPAWN_S, "the spare to be ready")
            assert pool.time_to_ready_s == whole_start  # a fresh start's, for the jobs' warm-up
            await parked(pool, not_pid=waiting)  # and a new spare behind it

    run(scenario())


def test_a_spare_that_dies_parked_is_replaced() -> None:
    async def scenario() -> None:
        async with running_pool(fast_settings(None, spare_sidecars="on")) as pool:
            first = await parked(pool)
            os.kill(first, signal.SIGKILL)
            second = await parked(pool, not_pid=first)
            assert pool.spares.pids == [first, second] and pool.spares.deaths["cpu0"] == 1
            assert not pool.slots[0].kills and pool.status() == "ok"  # the sidecar never noticed
            assert_gone([first])

    run(scenario())


def test_idle_reaping_stops_the_spare_and_the_next_start_is_fresh() -> None:
    async def scenario() -> None:
        settings = fast_settings(None, spare_sidecars="on", idle_reap_s=1.0)
        async with running_pool(settings) as pool:
            await wait_for(lambda: pool.slots[0].public_state == "reaped", 15, "idle reaping")
            await wait_for(lambda: not pool.spares.retired, 15, "the spare's exit")
            assert spare(pool) is None and pool.spares.pids
            assert_gone(pool.spares.pids)
            results = await outcomes(pool, items("Wake up."), BOUND_S)
            assert [r["op"] for r in results] == ["result"]
            assert process(pool).pid not in pool.spares.pids  # nothing parked to take

    run(scenario())
