"""bench/span_passes.py on spans written as the server writes them (one JSON object a line): each
batch's runtime counters counted once however many requests it held, added up per window."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from tests.helpers.paths import REPO_ROOT

S = 1_000_000_000


def steps_span(request: str, start_s: float, end_s: float, **runtime: float) -> dict[str, Any]:
    """One request's `steps` span carrying its batch's counters."""
    attributes = {f"omnivoice.sidecar.runtime_{k}": v for k, v in runtime.items()}
    return {
        "span_id": f"s-{request}",
        "parent_id": f"b-{request}",
        "name": "steps",
        "start_ns": int(start_s * S),
        "end_ns": int(end_s * S),
        "attributes": attributes,
    }


def test_a_batch_counts_once_and_windows_add_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(REPO_ROOT / "bench"))
    span_passes = importlib.import_module("span_passes")
    first = dict(forward_passes=32, padded_tokens=32 * 512, real_tokens=32 * 400)
    first |= dict(forward_s=0.08, gap_s=0.01, build_s=0.005, paced_s=0.25)
    second = dict(forward_passes=10, padded_tokens=10 * 4096, real_tokens=10 * 3500)
    second |= dict(forward_s=0.08, gap_s=0.04)
    spans = [
        steps_span("a", 0.0, 0.1, **first),
        steps_span("b", 0.0, 0.1, **first),  # the same batch: another of its requests
        steps_span("c", 4.0, 4.2, **first),
        steps_span("d", 12.0, 12.3, **second),
        {"name": "decode", "start_ns": 0, "end_ns": 1, "attributes": {}},
    ]
    found = span_passes.windows(spans, window_s=10.0)
    assert sorted(found) == [0, 1]
    assert found[0]["batches"] == 2 and found[0]["forward_passes"] == 64
    assert found[0]["gap_s"] == pytest.approx(0.02)
    lines = span_passes.report(found, window_s=10.0)
    assert lines[1].split() == [
        "0",
        "2",
        "64",
        "512",
        "400",
        "2.50",
        "0.16",
        "0.02",
        "0.01",
        "0.50",
    ]
    assert lines[2].split() == [
        "10",
        "1",
        "10",
        "4096",
        "3500",
        "8.00",
        "0.08",
        "0.04",
        "0.00",
        "0.00",
    ]
    assert span_passes.report({}, 10.0) == ["no `steps` span in the file"]
