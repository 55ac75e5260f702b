"""The harness's sweep arm (bench/queue_arms.py) against a live server on the null engine: every
rate runs, its streams are timed to their end, its slowest requests' spans are found in the
server's span file, and the result keys are those the harness writes (`interactive_sweep`). The
figures mean nothing on the CPU; the shape does."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.helpers import live_server
from tests.helpers.paths import REPO_ROOT


@pytest.fixture
def queue_arms(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(REPO_ROOT / "bench"))  # the harness's modules import by name
    import queue_arms as module

    return module


def test_the_sweep_times_every_rate_and_writes_its_keys(
    queue_arms: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = argparse.Namespace(
        arms={"sweep"},
        sweep_rates="20,40",
        sweep_seconds=0.5,
        interactive_stream="sse",
        trace_spans=tmp_path / "spans.jsonl",
    )
    # The server's environment, as `configure` sets it for the harness: its spans go to the file.
    for name, value in queue_arms.span_breakdown.server_env(args.trace_spans).items():
        monkeypatch.setenv(name, value)
    with live_server.live(tmp_path, key=None) as server:
        out: dict[str, Any] = {}
        asyncio.run(asyncio.wait_for(queue_arms.run(args, server.url, [], out), 120))
    sweep = out["sweep"]
    assert list(sweep) == ["20", "40"]
    for rate, run in sweep.items():
        assert run["requests"] == queue_arms.SWEEP_MIN_REQUESTS, rate
        assert run["statuses"] == {"200": run["requests"]}
        assert run["audio_s"] > 0 and run["x_realtime"] > 0
        assert run["first_audio_s"]["p50"] <= run["first_audio_s"]["p99"]
        assert run["underrun_s"]["p99"] >= 0.0
        spans = run["slowest_spans"]
        assert spans["requests"] == len(run["slowest"]) >= 1 and spans["missing"] == 0, rate
        assert {"queue", "steps"} <= set(spans["until_first_byte_s"]), rate
    result: dict[str, Any] = {"server": out}
    queue_arms.keys(result)
    assert set(result["interactive_sweep"]) == {"20", "40"}
    assert set(result["interactive_sweep"]["40"]) == {
        "p50_s",
        "p99_s",
        "x_realtime",
        "underrun_p99_s",
    }
    assert result["interactive_under_bulk_underrun_p99_s"] is None  # the bulk arm did not run
