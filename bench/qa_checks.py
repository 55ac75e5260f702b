"""The quality checks' values on a checkpoint's own output, clean and with each output fault.

    python bench/qa_checks.py --model CHECKPOINT [--steps 8] [--seeds 3] [--asr-model WHISPER]

Generates a few texts (English sentences, a Mandarin one) through the sidecar's engine, then
runs sidecar/audio/checks.py on each result as it is and as each output test fault spoils it
(sidecar/devtools/faults.py: nan, silence, runaway, length), and prints, per case, the range of every
check's value and how many results failed it. With --asr-model it also transcribes each clean
result (sidecar/audio/asr.py) and prints the round trip's `wer` and `divergent_run` and the time a
transcription took. The figures in docs/RELIABILITY.md come from it.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sidecar.audio.checks import run_checks
from sidecar.audio.wer import compare
from sidecar.devtools.faults import Fault, Faults
from sidecar.runtime.request import GenerationRequest
from sidecar.serve import engines
from sidecar.shared.thresholds import Thresholds

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
    parser.add_argument("--asr-model", default="", help="a Whisper checkpoint: time the round trip")
    args = parser.parse_args()
    dtype = engines.resolve_dtype("auto", args.device)
    engine = engines.load_engine(
        engines.EngineSpec("omnivoice", args.model, args.device, dtype), lambda _: None
    )
    faults = Faults()
    if args.asr_model:
        from sidecar.audio.asr import Transcriber

        started = time.monotonic()
        transcriber = Transcriber(args.asr_model, args.device, dtype)
        print(f"ASR loaded in {time.monotonic() - started:.2f} s")
    trips: list[tuple[float, float, float]] = []  # wer, divergent run, seconds
    values: dict[str, dict[str, list[float]]] = {case: defaultdict(list) for case in CASES}
    fails: dict[str, dict[str, int]] = {case: defaultdict(int) for case in CASES}
    for seed in range(args.seeds):
        requests = [GenerationRequest(text=t, num_step=args.steps, seed=seed) for t in TEXTS]
        for request, result in zip(requests, engine.generate(requests)):
            if args.asr_model:
                started = time.monotonic()
                heard = transcriber.transcribe(result.audio, result.sample_rate, None)
                rate, run = compare(request.text, heard)
                trips.append((rate, run, time.monotonic() - started))
            for case in CASES:
                spoil = [] if case == "clean" else [Fault(case)]
                audio = faults.on_output(spoil, result.audio, result.sample_rate, 1)
                checks = run_checks(audio, result.sample_rate, request.text, Thresholds())
                for name, check in checks.items():
                    values[case][name].append(check["value"])
                    fails[case][name] += not check["passed"]
    count = args.seeds * len(TEXTS)
    if trips:
        rates, runs, took = zip(*trips)
        print(
            f"round trip ({count} results): wer {min(rates):.2f} .. {max(rates):.2f}, "
            f"divergent_run {min(runs):.0f} .. {max(runs):.0f}, "
            f"{sum(took) / len(took) * 1000:.0f} ms a transcription"
        )
    for case in CASES:
        print(f"{case} ({count} results):")
        for name, found in values[case].items():
            print(f"  {name:17} {min(found):9.3f} .. {max(found):9.3f}  failed {fails[case][name]}")


if __name__ == "__main__":
    main()
