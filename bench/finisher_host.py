"""The host's share of the finisher thread: post-processing, checks, encoding and framing of one
mixed batch's audio (58 items of 4 to 20 s, speech-like noise in 100 ms bursts with gaps), timed
part by part on this machine's CPU. The codec is not in it (it runs on the GPU; see
bench/profile_step.py's `decode_ms`).

    .venv/bin/python bench/finisher_host.py [--items 58] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sidecar.audio import processing as audio
from sidecar.audio.checks import run_checks
from sidecar.runtime.omnivoice import OUTPUT_SILENCE_MS
from sidecar.serve.wire_arrays import audio_to_wire
from sidecar.shared.protocol import encode_frame
from sidecar.shared.thresholds import Thresholds

RATE = 24000
TEXT = "A sentence of a dozen words, read at an ordinary pace by the model. " * 4


def speech_like(rng: np.random.Generator, seconds: float) -> np.ndarray:
    """Noise in 100 ms bursts, a fifth of them silent, with silent edges."""
    samples = (rng.standard_normal(int(seconds * RATE)) * 0.1).astype(np.float32)
    bursts = np.repeat(rng.random(int(seconds * 10) + 1) > 0.2, RATE // 10)[: len(samples)]
    samples *= bursts
    samples[: RATE // 2] = 0
    samples[-RATE // 3 :] = 0
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=58)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    items = [speech_like(rng, s) for s in rng.uniform(4, 20, args.items)]
    parts = ("remove_silence", "loudness_and_fades", "checks", "to_wire", "frame")
    best = dict.fromkeys(parts, float("inf"))
    for _ in range(args.repeats):
        spent = dict.fromkeys(parts, 0.0)
        for samples in items:
            t0 = time.perf_counter()
            wav = audio.remove_silence(samples, RATE, *OUTPUT_SILENCE_MS)
            t1 = time.perf_counter()
            wav = audio.fade_and_pad(audio.normalize_output_loudness(wav, None), RATE)
            t2 = time.perf_counter()
            qa = run_checks(wav, RATE, TEXT, Thresholds())
            t3 = time.perf_counter()
            data = audio_to_wire(wav, "s16le")
            t4 = time.perf_counter()
            encode_frame({"op": "result", "audio": data, "qa": qa}, 1 << 30)
            t5 = time.perf_counter()
            for part, seconds in zip(parts, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4)):
                spent[part] += seconds
        best = {part: min(best[part], spent[part]) for part in parts}
    out = {
        "items": args.items,
        "audio_s": round(sum(len(x) for x in items) / RATE, 1),
        **{f"{part}_ms": round(best[part] * 1e3, 1) for part in parts},
        "total_ms": round(sum(best.values()) * 1e3, 1),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
