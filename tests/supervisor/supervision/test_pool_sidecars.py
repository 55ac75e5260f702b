"""supervisor/supervision/pool.py logic that needs no model: GPU memory reclaim, /health's shape, backoff."""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import re
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from sidecar.devtools.faults import LOAD_ENV
from supervisor.supervision import gpu
from supervisor.supervision.gpu import Device
from supervisor.supervision.pool import Pool
from supervisor.supervision.scheduler import Scheduler
from tests.helpers.harness import fast_settings, is_ready, process, run, running_pool, wait_for

FAKE_GPU = Device("gpu0", "cuda:0", 0)  # the null engine never touches the device


@pytest.fixture(autouse=True)
def one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


def test_health_has_the_contract_shape() -> None:
    async def scenario() -> None:
        async with running_pool(fast_settings(None)) as pool:
            body = pool.health()
            assert body["status"] == "ok"
            [entry] = body["sidecars"]
            assert set(entry) == {
                "id",
                "device",
                "pid",
                "state",
                "restarts",
                "kills",
                "last_error",
                "last_kill",
                "memory_bytes",
                "spare",
            }
            assert (
                entry["id"],
                entry["device"],
                entry["state"],
                entry["restarts"],
                entry["kills"],
                entry["last_error"],
            ) == ("cpu0", "cpu", "ready", 0, {}, None)
            assert entry["pid"] == process(pool).pid
            # more than the contract: the console's supervision view shows these
            assert (
                entry["last_kill"] is None and entry["memory_bytes"] > 10 * 2**20
            )  # a whole Python process
            assert entry["spare"] is None  # spares: test_spare.py
            assert body["queue"]["waiting_audio_s"] == {"interactive": 0.0, "bulk": 0.0}

    run(scenario())


def memory_stays(monkeypatch: pytest.MonkeyPatch, answers: list[bool]) -> list[int]:
    """Make NVML answer 'not back' / 'back' in turn (then the last answer forever)."""
    calls: list[int] = []
    monkeypatch.setattr(gpu, "memory_used", lambda index: 1 << 30)

    def memory_is_back(
        index: int, pid: int | None, baseline: int | None, slack: int
    ) -> tuple[bool, str]:
        calls.append(pid or 0)
        return answers[min(len(calls) - 1, len(answers) - 1)], "fake figures"

    monkeypatch.setattr(gpu, "memory_is_back", memory_is_back)
    return calls


async def gpu_pool_killed(settings: Any) -> Pool:
    pool = Pool(settings.supervision, Scheduler(settings.scheduling), [FAKE_GPU])
    await pool.start()
    await wait_for(lambda: is_ready(pool), 30, "ready")
    first = process(pool).pid
    os.kill(first, signal.SIGKILL)
    await wait_for(lambda: pool.slots[0].kills, 10, "the death")
    return pool


def test_respawn_waits_for_gpu_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = memory_stays(monkeypatch, [False, False, False, True])

    async def scenario() -> None:
        pool = await gpu_pool_killed(fast_settings(None))
        try:
            await wait_for(lambda: is_ready(pool), 30, "the respawn")
            assert (
                len(calls) >= 4 and calls[0] == pool.slots[0].pids[0]
            )  # the dead pid was asked about
        finally:
            await pool.stop(0)

    run(scenario())


def test_gpu_whose_memory_never_returns_is_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    memory_stays(monkeypatch, [False])

    async def scenario() -> None:
        pool = await gpu_pool_killed(fast_settings(None, memory_reclaim_s=0.5))
        try:
            await wait_for(
                lambda: pool.slots[0].public_state == "failed", 10, "the GPU to be marked failed"
            )
            assert (
                "did not come back" in (pool.slots[0].last_error or "")
                and len(pool.slots[0].pids) == 1
            )
            assert pool.health()["status"] == "failed"
        finally:
            await pool.stop(0)

    run(scenario())


def test_backoff_grows_between_respawns(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The first respawn is at once, then each waits backoff_initial_s, doubling. The delays are
    the pool's own (its log); the measured gaps show each was waited out. No upper bound on a
    gap: a loaded machine only makes them longer (the fake-clock table in tests/supervisor/supervision/test_pool.py holds
    the exact respawn times)."""
    monkeypatch.setenv(LOAD_ENV, "crash")
    starts: list[float] = []

    async def scenario() -> None:
        settings = fast_settings(None, backoff_initial_s=0.3, backoff_max_s=5.0, max_restarts=3)
        async with running_pool(settings, wait_ready=False) as pool:
            seen, deadline = 0, time.monotonic() + 120
            while pool.slots[0].public_state != "failed":
                assert time.monotonic() < deadline, "the device was never marked failed"
                if len(pool.slots[0].pids) > seen:
                    seen = len(pool.slots[0].pids)
                    starts.append(time.monotonic())
                await asyncio.sleep(0.01)  # sampling: each start's time is what is measured

    with caplog.at_level(logging.INFO, logger="omnivoice.pool"):
        run(scenario())
    delays = [
        float(found[1])
        for r in caplog.records
        if (found := re.search(r"respawn in ([\d.]+) s", r.getMessage()))
    ]
    assert delays == [0.0, 0.3, 0.6], delays
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    # a start is seen up to one 10 ms poll late, so a gap may read a poll short (0.5996 s for 0.6)
    slack = 0.02
    assert len(gaps) == 3 and 0.3 - slack <= gaps[1] and 0.6 - slack <= gaps[2], gaps
    assert gaps[2] > gaps[1]


def test_a_batch_that_steps_while_the_one_before_decodes_is_no_protocol_error() -> None:
    """The sidecar denoises the next batch while the first still decodes (its finisher thread):
    step frames of batch 2 arrive before `done` of batch 1, and the pool must take them."""

    async def scenario() -> None:
        # In turn, as batches run under load: a light join would merge them instead.
        settings = fast_settings(None, max_batch_size=1, light_joins=False)
        async with running_pool(settings) as pool:
            futures = pool.scheduler.submit(
                [
                    {"id": "a", "text": "Decode slowly. [[fault:decodeslow:1]]", "seed": 0},
                    {"id": "b", "text": "Right behind it.", "seed": 1},
                ]
            )
            stepped_early = False
            while not futures[0].done():
                session = pool.slots[0].session
                assert session is not None
                stepped_early = stepped_early or (
                    len(session.batches) == 2 and session.batches[1].started
                )
                await asyncio.sleep(0.01)  # sampling the batches in flight until the first ends
            results = await asyncio.gather(*futures)
            assert [r["op"] for r in results] == ["result", "result"]
            assert stepped_early, "batch 2 never stepped while batch 1 decoded"
            assert not pool.slots[0].kills

    run(scenario())


def test_a_third_batch_goes_to_the_sidecar_while_the_first_decodes() -> None:
    """A real sidecar says `denoised` before its slow decode, and the pool sends a third
    batch then, so the sidecar always has the next batch to denoise."""

    async def scenario() -> None:
        # In turn, as batches run under load: a light join would merge them instead.
        settings = fast_settings(None, max_batch_size=1, light_joins=False)
        async with running_pool(settings) as pool:
            futures = pool.scheduler.submit(
                [
                    {"id": "a", "text": "Decode slowly. [[fault:decodeslow:2]]", "seed": 0},
                    {"id": "b", "text": "Right behind it.", "seed": 1},
                    {"id": "c", "text": "And the third.", "seed": 2},
                ]
            )
            most = 0
            while not futures[0].done():
                session = pool.slots[0].session
                assert session is not None
                most = max(most, len(session.batches))
                await asyncio.sleep(0.01)  # sampling the batches in flight until the first ends
            results = await asyncio.gather(*futures)
            assert [r["id"] for r in results] == ["a", "b", "c"]
            assert most == 3, "the third batch was not sent while the first decoded"
            assert not pool.slots[0].kills

    run(scenario())


def test_a_crash_in_the_next_batch_requeues_the_one_still_decoding(tmp_path: Path) -> None:
    slow, crash = tmp_path / "slow", tmp_path / "crash"
    slow.touch()
    crash.touch()

    async def scenario() -> None:
        async with running_pool(fast_settings(None, max_batch_size=1)) as pool:
            futures = pool.scheduler.submit(
                [
                    {"id": "a", "text": f"Decoding. [[fault:decodeslow:2@{slow}]]", "seed": 0},
                    {"id": "b", "text": f"Crashes once. [[fault:crash@{crash}]]", "seed": 1},
                ]
            )
            results = await asyncio.wait_for(asyncio.gather(*futures), 60)
            assert [r["op"] for r in results] == ["result", "result"]
            assert dict(pool.slots[0].kills) == {"exited": 1}

    run(scenario())
