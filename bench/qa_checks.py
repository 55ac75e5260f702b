"""The quality checks' values on a checkpoint's own output, clean and with each output fault.

    python bench/qa_checks.py --model CHECKPOINT [--steps 8] [--seeds 3]

Generates a few texts (English sentences, a Mandarin one) through the sidecar's engine, then
runs sidecar/checks.py on each result as it is and as each output test fault spoils it
(sidecar/faults.py: nan, silence, runaway, length), and prints, per case, the range of every
check's value and how many results failed it. The figures in docs/RELIABILITY.md come from it.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sidecar import engines
from sidecar.checks import run_checks
from sidecar.faults import Fault, Faults
from sidecar.request import GenerationRequest
from sidecar.thresholds import Thresholds

TEXTS = [
    "The 6:15 to Brighton is delayed by ten minutes.",
    "Please stand clear of the closing doors.",
    "Chapter one. It was a bright cold day in April.",
    "The museum will close in fifteen minutes.",
    "今天天气很好，我们去公园散步吧。",
]
CASES = ("clean", "nan", "silence", "runaway", "length")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    dtype = engines.resolve_dtype("auto", args.device)
    engine = engines.load_engine("omnivoice", args.model, args.device, dtype, lambda _: None)
    faults = Faults(True, lambda _: None, 1 << 20)
    values: dict[str, dict[str, list[float]]] = {case: defaultdict(list) for case in CASES}
    fails: dict[str, dict[str, int]] = {case: defaultdict(int) for case in CASES}
    for seed in range(args.seeds):
        requests = [GenerationRequest(text=t, num_step=args.steps, seed=seed) for t in TEXTS]
        for request, result in zip(requests, engine.generate(requests)):
            for case in CASES:
                spoil = [] if case == "clean" else [Fault(case)]
                audio = faults.on_output(spoil, result.audio, result.sample_rate, 1)
                checks = run_checks(audio, result.sample_rate, request.text, Thresholds())
                for name, check in checks.items():
                    values[case][name].append(check["value"])
                    fails[case][name] += not check["passed"]
    count = args.seeds * len(TEXTS)
    for case in CASES:
        print(f"{case} ({count} results):")
        for name, found in values[case].items():
            print(f"  {name:17} {min(found):9.3f} .. {max(found):9.3f}  failed {fails[case][name]}")


if __name__ == "__main__":
    main()
