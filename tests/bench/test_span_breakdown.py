"""bench/span_breakdown.py with the harness's own interactive requests (bench/job_arm.py) against a
live server on the null engine, started with the environment the harness gives it: the slowest
request's spans are found in the server's file by the trace id its answer named, and its first
audio's wait is broken down by span name."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.helpers.live_server import live
from tests.helpers.paths import REPO_ROOT


def test_the_slowest_requests_wait_is_broken_down_by_span(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(REPO_ROOT / "bench"))
    import job_arm
    import span_breakdown
    import workloads

    path = tmp_path / "spans.jsonl"
    for name, value in span_breakdown.server_env(path).items():
        monkeypatch.setenv(name, value)
    with live(tmp_path, key=None) as server:
        measured = asyncio.run(job_arm.interactive(server.url, workloads.short(8), 20.0, "sse"))
        assert measured["statuses"] == {"200": 8}
        (slow,) = measured["slowest"]  # 1 % of 8: the slowest one
        report = span_breakdown.report(path, [slow])
    assert report["requests"] == 1 and report["missing"] == 0, report
    (request,) = report["slowest"]
    assert request["root"] == "POST /v1/audio/speech"
    assert {"admission", "queue", "batch", "steps"} <= set(request["until_first_byte_s"])
    assert request["batches"] and all(b["items"] >= 1 for b in request["batches"])
    assert set(report["until_first_byte_s"]) == set(request["until_first_byte_s"])
    # Nothing before the first byte lasts longer than the wait for it.
    assert max(request["until_first_byte_s"].values()) <= request["spans_s"]["first_byte"]
