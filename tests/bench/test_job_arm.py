"""The harness's bulk arm (bench/job_arm.py) against a live server on the null engine: beside
the job's figures it reads the supervisor's event loop lag from /metrics, and the harness's
keys carry it (`bulk_event_loop_lag_p99_s`, `_max_s`). The figures mean nothing on the CPU;
the shape does."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.helpers import live_server
from tests.helpers.paths import REPO_ROOT


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> tuple[ModuleType, ModuleType, ModuleType]:
    monkeypatch.syspath_prepend(str(REPO_ROOT / "bench"))  # the harness's modules import by name
    import job_arm
    import queue_arms
    import workloads

    return job_arm, queue_arms, workloads


def test_the_bulk_arm_reports_the_event_loop_lag_beside_the_job(
    bench: tuple[ModuleType, ModuleType, ModuleType], tmp_path: Path
) -> None:
    job_arm, queue_arms, workloads = bench
    items = [r for r in workloads.mixed(40) if r.kind != "clone"][:20]  # no saved voice here
    with live_server.live(tmp_path, key=None) as server:
        run = job_arm.bulk(server.url, items, workloads.short(12), 10.0, "sse", 2, None)
        out: dict[str, Any] = asyncio.run(asyncio.wait_for(run, 120))
    lag = out["loop_lag"]
    assert lag["samples"] > 0  # the probe ran all through the loaded run
    assert lag["p99_s"] is not None and lag["p99_s"] <= (lag["max_s"] or float("inf"))
    assert lag["over_50ms"] <= lag["samples"]
    result: dict[str, Any] = {"server": {"bulk": out}}
    queue_arms.keys(result)
    assert result["bulk_event_loop_lag_p99_s"] == lag["p99_s"]
    assert result["bulk_event_loop_lag_max_s"] == lag["max_s"]


def test_no_samples_no_figures(bench: tuple[ModuleType, ModuleType, ModuleType]) -> None:
    job_arm = bench[0]
    bounds = {0.01: 3.0, 0.05: 5.0, float("inf"): 5.0}
    assert job_arm.loop_lag(bounds, bounds)["p99_s"] is None
    held = job_arm.loop_lag(bounds, {0.01: 93.0, 0.05: 104.0, float("inf"): 105.0})
    assert held == {"samples": 100.0, "p99_s": 0.05, "max_s": None, "over_50ms": 1.0}
