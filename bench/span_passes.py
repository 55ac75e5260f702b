"""How busy the device was and with what passes, from a harness run's span file (`--trace-spans`).

    python3 bench/span_passes.py SPANS.jsonl [--window-s 10]

Each batch's `done` carries the runtime's counters for the steps it ran (its `steps` span's
`omnivoice.sidecar.runtime_*` attributes: forward passes, real and padded tokens, and the device
seconds of the passes, `forward_s`, and of the gap before each of the runtime's batches, `gap_s`:
the device idle for want of work, or while the host prepared the next batch state; only where
the device is saturated is it all the host's; and the host's own seconds building batch
states, `build_s`, and waiting for the device under the bound on queued steps, `paced_s`: a
host that waits a good share of the time was not what kept the device idle). A running
batch's counters go to the oldest batch it ran for, so they are added up per window of the
run (seconds from the first batch's steps), never read per request. Printed per window: the
batches, the forward passes, the mean padded and real tokens a pass, the device milliseconds a
pass, the device seconds of the passes and of the gaps (over the window's length, the share of
the device each took), and the host's seconds building and waiting.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

PREFIX = "omnivoice.sidecar."
COUNTERS = (
    "forward_passes",
    "padded_tokens",
    "real_tokens",
    "forward_s",
    "gap_s",
    "build_s",
    "paced_s",
)


def windows(spans: Iterable[dict[str, Any]], window_s: float) -> dict[int, Counter[str]]:
    """Each window's sums of the counters, over the distinct batches whose steps began in it."""
    # One `steps` span per request of a batch, each with the batch's figures and times.
    steps = {(s["start_ns"], s["end_ns"]): s for s in spans if s["name"] == "steps"}
    ordered = sorted(steps.values(), key=lambda s: s["start_ns"])
    out: dict[int, Counter[str]] = defaultdict(Counter)
    if not ordered:
        return out
    t0 = ordered[0]["start_ns"]
    for span in ordered:
        sums = out[int((span["start_ns"] - t0) / 1e9 // window_s)]
        sums["batches"] += 1
        attrs = span["attributes"]
        for name in COUNTERS:
            sums[name] += attrs.get(f"{PREFIX}runtime_{name}", 0.0)
    return out


def report(found: dict[int, Counter[str]], window_s: float) -> list[str]:
    if not found:
        return ["no `steps` span in the file"]
    lines = [
        "window_s batches passes padded_per_pass real_per_pass ms_per_pass forward_s gap_s"
        " build_s paced_s"
    ]
    for index in sorted(found):
        sums = found[index]
        passes = sums["forward_passes"] or 1.0
        lines.append(
            f"{index * window_s:8.0f} {sums['batches']:7.0f} {sums['forward_passes']:6.0f} "
            f"{sums['padded_tokens'] / passes:15.0f} {sums['real_tokens'] / passes:13.0f} "
            f"{1000 * sums['forward_s'] / passes:11.2f} {sums['forward_s']:9.2f} "
            f"{sums['gap_s']:5.2f} {sums['build_s']:7.2f} {sums['paced_s']:7.2f}"
        )
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("spans", type=Path)
    ap.add_argument("--window-s", type=float, default=10.0)
    args = ap.parse_args()
    with args.spans.open(encoding="utf-8") as lines:
        found = windows((json.loads(line) for line in lines), args.window_s)
    print("\n".join(report(found, args.window_s)))


if __name__ == "__main__":
    main()
