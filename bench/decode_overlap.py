"""The codec decoding on a CUDA stream of its own, checked and timed on a GPU (issue 22).

    python3 bench/decode_overlap.py CHECKPOINT --out result.json

Runs --batches batches of --batch auto-voice items (~8 s each) through the runtime: one after
another (denoise, then decode); pipelined as the sidecar runs them (the main thread denoises
batch n + 1 while a finisher thread decodes batch n) with the decode on the denoising stream, as
before; and pipelined with the decode on `decode_stream`. Reports the wall times and x realtime,
and checks that the audio decoded on `decode_stream` while the next batch denoised
equals, bit for bit, the same tokens decoded on the denoising stream afterwards.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from runtime_speed import EIGHT_SECONDS

from sidecar.runtime.omnivoice import OmniVoice
from sidecar.runtime.request import GenerationRequest


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--batches", type=int, default=6)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    model = OmniVoice.load(args.checkpoint, device=args.device, dtype="bfloat16")

    def batch(n: int) -> list[GenerationRequest]:
        return [GenerationRequest(text=EIGHT_SECONDS, seed=n * 1000 + i) for i in range(args.batch)]

    model.generate(batch(99)[:4])  # warm-up: the codec's compiled kernels
    torch.cuda.synchronize()
    start = time.perf_counter()
    audio_s = 0.0
    for n in range(args.batches):
        audio_s += sum(r.audio.size for r in model.generate(batch(n))) / model.sample_rate
    serial_s = time.perf_counter() - start

    finisher = ThreadPoolExecutor(max_workers=1)

    def pipelined() -> tuple[float, list, list]:
        torch.cuda.synchronize()
        start = time.perf_counter()
        pending, denoised = [], []
        for n in range(args.batches):
            denoised.append(model.denoise(batch(n)))
            pending.append(finisher.submit(model.decode, denoised[-1]))
        results = [f.result() for f in pending]
        return time.perf_counter() - start, results, denoised

    stream, model.decode_stream = model.decode_stream, None
    one_stream_s, _, _ = pipelined()  # as before: the decode on the denoising stream
    model.decode_stream = stream
    pipelined_s, results, denoised = pipelined()

    model.decode_stream = None
    on_denoise_stream = [model.decode(d) for d in denoised]
    model.decode_stream = stream
    equal = all(
        np.array_equal(a.audio, b.audio)
        for got, want in zip(results, on_denoise_stream)
        for a, b in zip(got, want)
    )
    out = {
        "gpu": torch.cuda.get_device_name(args.device),
        "batch": args.batch,
        "batches": args.batches,
        "audio_s": round(audio_s, 1),
        "serial_s": round(serial_s, 3),
        "pipelined_one_stream_s": round(one_stream_s, 3),
        "pipelined_s": round(pipelined_s, 3),
        "serial_x_realtime": round(audio_s / serial_s, 1),
        "pipelined_one_stream_x_realtime": round(audio_s / one_stream_s, 1),
        "pipelined_x_realtime": round(audio_s / pipelined_s, 1),
        "audio_equal_to_denoise_stream": equal,
    }
    print(json.dumps(out, indent=2))
    if args.out:
        args.out.write_text(json.dumps(out, indent=2) + "\n")
    return 0 if equal else 1


if __name__ == "__main__":
    raise SystemExit(main())
