"""The codec's decode graphs (sidecar/runtime/codec_graphs.py) on a GPU: a short request's decode
(`Codec.decode_many` of one item) with and without them, its time and its audio.

    python3 bench/codec_graphs.py CHECKPOINT_DIR --out codec-graphs.json

On the checkpoint's codec (float32, its Snake activations compiled, as the runtime loads it), on a
decode stream at the runtime's priority: for each length, the eager decode's and the replayed
decode's milliseconds (median of `--repeats`, each waited for), and the largest difference
between their audio (the graphs run the same kernels: 0 expected). Writes one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from sidecar.runtime import streams
from sidecar.runtime.codec import Codec, load_codec

LENGTHS = (20, 45, 113, 128, 200, 250)  # frames: decoded whole, then rounded with a tail


def timed_ms(codec: Codec, codes: torch.Tensor, stream: torch.cuda.Stream, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        with torch.cuda.stream(stream):
            codec.decode_many([codes])
        stream.synchronize()
        times.append((time.perf_counter() - start) * 1000)
    return round(statistics.median(times), 3)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--commit", default="unknown")
    args = ap.parse_args()
    device = torch.device("cuda")
    codec = load_codec(args.checkpoint / "audio_tokenizer", device=device)
    codec.use_decoder_dtype(torch.float32)
    codec.fuse_activations()
    stream = torch.cuda.Stream(device, priority=streams.INTERACTIVE_DECODE_PRIORITY)
    gen = torch.Generator().manual_seed(0)
    samples = {n: torch.randint(0, 1024, (8, n), generator=gen).to(device) for n in LENGTHS}
    codec.warm_shapes()
    for n in LENGTHS:  # the lengths decoded whole: their own shapes, set up outside the timing
        with torch.cuda.stream(stream):
            codec.decode_many([samples[n]])
    eager = {n: timed_ms(codec, samples[n], stream, args.repeats) for n in LENGTHS}
    with torch.cuda.stream(stream):
        want = {n: codec.decode_many([samples[n]])[0].clone() for n in LENGTHS}
    stream.synchronize()
    start = time.perf_counter()
    count = codec.capture_graphs([stream])
    capture_s = round(time.perf_counter() - start, 2)
    graphed = {n: timed_ms(codec, samples[n], stream, args.repeats) for n in LENGTHS}
    with torch.cuda.stream(stream):
        got = {n: codec.decode_many([samples[n]])[0] for n in LENGTHS}
    stream.synchronize()
    rows = [
        {
            "frames": n,
            "eager_ms": eager[n],
            "graphs_ms": graphed[n],
            "max_abs_diff": float((got[n] - want[n]).abs().max()),
        }
        for n in LENGTHS
    ]
    result = {"commit": args.commit, "graphs": count, "capture_s": capture_s, "rows": rows}
    args.out.write_text(json.dumps(result, indent=1))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
