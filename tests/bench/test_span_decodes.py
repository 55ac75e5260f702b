"""bench/span_decodes.py on spans written as the server writes them (one JSON object a line): a
batch's steps and decode found under its requests' `batch` spans, the finisher's backlog
measured, and single-item decodes split by whether their length came before."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from tests.helpers.paths import REPO_ROOT

MS = 1_000_000


def batch_spans(
    batch: int,
    tier: str,
    items: int,
    times_ms: tuple[int, int, int, int],
    codec_s: float,
    audio_s: float,
) -> list[dict[str, Any]]:
    """A batch span and its steps and decode, as the server writes them; `times_ms`: the steps'
    start and end, then the decode's."""
    steps_ms, decode_ms = times_ms[:2], times_ms[2:]
    span_id = f"b{batch}"
    attributes = {
        "omnivoice.batch.id": batch,
        "omnivoice.batch.tier": tier,
        "omnivoice.batch.items": items,
        "omnivoice.sidecar.audio_s": audio_s,
    }
    parent = {"span_id": span_id, "parent_id": "root", "name": "batch", "attributes": attributes}
    parent |= {"start_ns": steps_ms[0] * MS, "end_ns": decode_ms[1] * MS}
    steps = {"span_id": f"s{batch}", "parent_id": span_id, "name": "steps", "attributes": {}}
    steps |= {"start_ns": steps_ms[0] * MS, "end_ns": steps_ms[1] * MS}
    decode = {"span_id": f"d{batch}", "parent_id": span_id, "name": "decode"}
    decode |= {"attributes": {"omnivoice.sidecar.codec_s": codec_s}}
    decode |= {"start_ns": decode_ms[0] * MS, "end_ns": decode_ms[1] * MS}
    return [parent, steps, decode]


def test_the_backlog_and_the_first_seen_lengths(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(REPO_ROOT / "bench"))
    span_decodes = importlib.import_module("span_decodes")
    spans = (
        batch_spans(1, "interactive", 1, (0, 400, 400, 480), 0.08, 2.0)  # a new length
        + batch_spans(2, "interactive", 1, (100, 500, 1500, 1520), 0.02, 2.0)  # seen; 1 s late
        + batch_spans(3, "bulk", 64, (0, 4000, 4000, 5000), 0.5, 3.0)
    )
    found = span_decodes.batches(spans)
    assert sorted(found) == [1, 2, 3]
    assert found[2].gap_s == pytest.approx(1.0) and found[1].gap_s == 0.0
    lines = span_decodes.report(found, window_s=10.0)
    interactive = next(line for line in lines if " inte " in line).split()
    assert interactive[2:6] == ["2", "1.0", "0.500", "1.000"]  # batches, items, gap p50, max
    assert any("first-seen length: 1 batches, p50 0.080" in line for line in lines), lines
    assert any("seen before: 1 batches, p50 0.020" in line for line in lines), lines
