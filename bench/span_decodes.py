"""Where batches wait for their decode, from a harness run's span file (`--trace-spans FILE`).

    python3 bench/span_decodes.py SPANS.jsonl [--window-s 10]

Each batch's `steps` and `decode` spans (children of a request's `batch` span, with the batch's
id, tier and items) give, per batch: when its steps ended, when its finisher began decoding it
(the gap between is the finisher's backlog), and its codec seconds. Printed:

- per window of the run (seconds from the first batch) and tier: the batches' count, mean
  items, gap p50 and largest, codec mean and steps' mean wall;
- the single-item batches' codec seconds split by whether an item of the same audio length
  (the request's `audio_s` to 40 ms) was decoded before: the codec's cost of a shape it meets
  for the first time. The length is the answer's, after trimming silence, so the split is
  approximate.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class BatchSpans:
    tier: str
    items: int
    audio_s: list[float] = field(default_factory=list)
    steps: tuple[int, int] | None = None
    decode: tuple[int, int] | None = None
    codec_s: float | None = None

    @property
    def steps_s(self) -> float:
        assert self.steps is not None
        return (self.steps[1] - self.steps[0]) / 1e9

    @property
    def gap_s(self) -> float:
        assert self.steps is not None and self.decode is not None
        return max(0.0, (self.decode[0] - self.steps[1]) / 1e9)


def batches(spans: Iterable[dict[str, Any]]) -> dict[int, BatchSpans]:
    """Each batch id's spans, from every request that ran in it."""
    spans = list(spans)
    by_id = {s["span_id"]: s for s in spans}
    out: dict[int, BatchSpans] = {}
    for span in spans:
        parent = span if span["name"] == "batch" else by_id.get(span["parent_id"])
        if parent is None or parent["name"] != "batch":
            continue
        attrs = parent["attributes"]
        batch = out.setdefault(
            attrs["omnivoice.batch.id"],
            BatchSpans(attrs["omnivoice.batch.tier"], attrs["omnivoice.batch.items"]),
        )
        if span["name"] == "batch" and "omnivoice.sidecar.audio_s" in attrs:
            batch.audio_s.append(attrs["omnivoice.sidecar.audio_s"])
        elif span["name"] == "steps":
            batch.steps = (span["start_ns"], span["end_ns"])
        elif span["name"] == "decode":
            batch.decode = (span["start_ns"], span["end_ns"])
            batch.codec_s = span["attributes"].get("omnivoice.sidecar.codec_s")
    return {k: b for k, b in out.items() if b.steps is not None and b.decode is not None}


def report(found: dict[int, BatchSpans], window_s: float) -> list[str]:
    lines = []
    ordered = sorted(found.values(), key=lambda b: b.steps[0])  # type: ignore[index]
    if not ordered:
        return ["no batch has both its steps and its decode in the file"]
    t0 = ordered[0].steps[0]  # type: ignore[index]
    windows: dict[int, list[BatchSpans]] = defaultdict(list)
    for batch in ordered:
        windows[int((batch.steps[0] - t0) / 1e9 // window_s)].append(batch)  # type: ignore[index]
    lines.append("window_s tier batches items_mean gap_p50_s gap_max_s codec_mean_s steps_mean_s")
    for index in sorted(windows):
        for tier in ("interactive", "bulk"):
            mine = [b for b in windows[index] if b.tier == tier]
            if not mine:
                continue
            gaps = [b.gap_s for b in mine]
            lines.append(
                f"{index * window_s:8.0f} {tier[:4]} {len(mine):7d} "
                f"{statistics.mean(b.items for b in mine):10.1f} {statistics.median(gaps):9.3f} "
                f"{max(gaps):9.3f} {statistics.mean(b.codec_s or 0.0 for b in mine):12.3f} "
                f"{statistics.mean(b.steps_s for b in mine):12.3f}"
            )
    seen: set[int] = set()
    first: list[float] = []
    again: list[float] = []
    for batch in ordered:
        if batch.items != 1 or not batch.audio_s or batch.codec_s is None:
            continue
        length = round(batch.audio_s[0] / 0.04)
        (again if length in seen else first).append(batch.codec_s)
        seen.add(length)
    for name, values in (("first-seen length", first), ("length seen before", again)):
        if values:
            values.sort()
            over = sum(v > 0.05 for v in values) / len(values)
            lines.append(
                f"single-item codec, {name}: {len(values)} batches, p50 "
                f"{values[len(values) // 2]:.3f} s, p90 {values[int(len(values) * 0.9)]:.3f} s, "
                f"mean {statistics.mean(values):.3f} s, over 50 ms {over:.2f}"
            )
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("spans", type=Path)
    ap.add_argument("--window-s", type=float, default=10.0)
    args = ap.parse_args()
    with args.spans.open(encoding="utf-8") as lines:
        found = batches(json.loads(line) for line in lines)
    print("\n".join(report(found, args.window_s)))


if __name__ == "__main__":
    main()
