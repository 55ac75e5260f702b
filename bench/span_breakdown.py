"""Where the slowest interactive requests spent their time, from the server's spans.

With `--trace-spans FILE` the harness starts the server with `OMNIVOICE_TRACE_FILE=FILE` (one
JSON object a line per span: supervisor/tracing/setup.py), and each interactive request keeps the
trace id its answer names (`X-Trace-Id`). After the bulk arm, `report` takes the slowest 1 % of
the interactive requests beside the job (by first audio, at least one) and adds up each one's
spans by name: whole (`spans_s`), and clipped to the time before its first byte left the server
(`until_first_byte_s`: where its first audio's wait went). Across them, per span name, the mean
and the largest of the latter; per request, its batches (their tier, items, tokens, steps).
"""

from __future__ import annotations

import json
import math
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

SHARE = 0.01  # the slowest 1 %
WAIT_S = 30.0  # for the server's batch of spans to reach the file
BATCH_FIGURES = {
    "omnivoice.batch.tier": "tier",
    "omnivoice.batch.items": "items",
    "omnivoice.batch.tokens": "tokens",
    "omnivoice.batch.id": "batch",
}
ROOT_PREFIX = "POST "


def server_env(path: Path) -> dict[str, str]:
    """What the server's environment needs for its spans to reach `path` whole: a queue that
    does not drop spans under the bulk arm's load, sent every second."""
    return {
        "OMNIVOICE_TRACE_FILE": str(path),
        "OTEL_BSP_MAX_QUEUE_SIZE": "262144",
        "OTEL_BSP_SCHEDULE_DELAY": "1000",
    }


def slowest(results: Sequence[dict[str, Any]], share: float = SHARE) -> list[dict[str, Any]]:
    """The slowest `share` of answered requests by first audio (at least one), with trace ids."""
    timed = [r for r in results if r.get("first_audio") is not None and r.get("trace_id")]
    timed.sort(key=lambda r: r["first_audio"], reverse=True)
    count = max(1, math.ceil(len(timed) * share)) if timed else 0
    return [
        {"trace_id": r["trace_id"], "first_audio_s": round(r["first_audio"], 4)}
        for r in timed[:count]
    ]


def read_spans(path: Path, wanted: set[str]) -> dict[str, list[dict[str, Any]]]:
    """The file's spans of the `wanted` traces, by trace id."""
    found: dict[str, list[dict[str, Any]]] = defaultdict(list)
    if not path.exists():
        return found
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            span = json.loads(line)
            if span["trace_id"] in wanted:
                found[span["trace_id"]].append(span)
    return found


def wait_for_roots(path: Path, wanted: set[str], wait_s: float = WAIT_S) -> dict[str, Any]:
    """The wanted traces' spans, once each has its root (the last of a request's to end)."""
    deadline = time.monotonic() + wait_s
    while True:
        found = read_spans(path, wanted)
        whole = all(any(s["parent_id"] is None for s in found.get(t, [])) for t in wanted)
        if whole or time.monotonic() > deadline:
            return found
        time.sleep(0.5)


def clipped_s(span: dict[str, Any], start_ns: int, end_ns: int) -> float:
    return max(0, min(span["end_ns"], end_ns) - max(span["start_ns"], start_ns)) / 1e9


def one_request(slow: dict[str, Any], spans: list[dict[str, Any]]) -> dict[str, Any]:
    """A request's spans by name: whole, and before its first byte."""
    root = next((s for s in spans if s["parent_id"] is None), None)
    first = next((s for s in spans if s["name"] == "first_byte"), None)
    out: dict[str, Any] = {**slow, "root": root["name"] if root else None}
    if root is None:
        out["missing"] = True
        return out
    until = first["end_ns"] if first else root["end_ns"]
    whole: dict[str, float] = defaultdict(float)
    before: dict[str, float] = defaultdict(float)
    for span in spans:
        if span is root:
            continue
        whole[span["name"]] += (span["end_ns"] - span["start_ns"]) / 1e9
        before[span["name"]] += clipped_s(span, root["start_ns"], until)
    out["server_s"] = round((root["end_ns"] - root["start_ns"]) / 1e9, 4)
    out["spans_s"] = {name: round(v, 4) for name, v in sorted(whole.items())}
    out["until_first_byte_s"] = {name: round(v, 4) for name, v in sorted(before.items()) if v}
    out["batches"] = [
        {
            short: span["attributes"].get(key)
            for key, short in BATCH_FIGURES.items()
            if key in span["attributes"]
        }
        for span in spans
        if span["name"] == "batch"
    ]
    steps = [s["attributes"].get("omnivoice.sidecar.steps") for s in spans if s["name"] == "steps"]
    for batch, count in zip(out["batches"], steps):
        batch["steps"] = count
    return out


def summary(requests: Iterable[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per span name, over the requests: the mean and largest time before the first byte."""
    seen: dict[str, list[float]] = defaultdict(list)
    measured = [r for r in requests if "until_first_byte_s" in r]
    for r in measured:
        for name, value in r["until_first_byte_s"].items():
            seen[name].append(value)
    return {
        name: {
            "mean_s": round(sum(values) / len(measured), 4),
            "max_s": round(max(values), 4),
        }
        for name, values in sorted(seen.items())
    }


def report(path: Path, slow: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The result's `interactive_under_bulk_slowest`."""
    found = wait_for_roots(path, {s["trace_id"] for s in slow})
    requests = [one_request(s, found.get(s["trace_id"], [])) for s in slow]
    return {
        "share": SHARE,
        "requests": len(requests),
        "missing": sum(1 for r in requests if r.get("missing")),
        "until_first_byte_s": summary(requests),
        "slowest": requests,
    }
