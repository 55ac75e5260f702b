"""Joined projections in plain PyTorch on the GPU: q/k/v as one matrix product against three, and
gate/up as one against two, at a step's token counts (bf16, the backbone's sizes, random values).

    python3 bench/joined_projections.py --out joined.json

For each token count: whether each output column block of the joined product equals the separate
product bit for bit, and the milliseconds of each way (one layer's projections). Under
torch.compile's default mode the layer stack's matrix products are these same cuBLAS calls, so
this answers in seconds what `bash bench/forward_probes.sh --projections` answers for the whole
compiled, graphed forward.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
import torch.nn.functional as F
from profile_step import timeit

HIDDEN, Q_OUT, KV_OUT, MLP_OUT = 1024, 2048, 1024, 3072  # the backbone's projections
TOKENS = (270, 540, 1080, 4320, 17280, 34560, 45875)


def ms(fn) -> float:
    """Milliseconds per call, 50 back to back (`profile_step.timeit`)."""
    return timeit(fn, torch.cuda.synchronize, repeats=50) * 1e3


def compare(x: torch.Tensor, weights: list[torch.Tensor]) -> dict:
    joined = torch.cat(weights)
    separate = [F.linear(x, w) for w in weights]
    together = F.linear(x, joined).split([w.shape[0] for w in weights], dim=-1)
    return {
        "bit_equal": all(torch.equal(a, b) for a, b in zip(separate, together)),
        "max_abs_diff": max(float((a - b).abs().max()) for a, b in zip(separate, together)),
        "separate_ms": round(ms(lambda: [F.linear(x, w) for w in weights]), 4),
        "joined_ms": round(ms(lambda: F.linear(x, joined)), 4),
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    gen = torch.Generator(device="cuda").manual_seed(0)

    def randn(*shape: int, std: float) -> torch.Tensor:
        t = torch.randn(*shape, device="cuda", generator=gen) * std
        return t.to(torch.bfloat16)

    qkv = [randn(Q_OUT, HIDDEN, std=0.03), randn(KV_OUT, HIDDEN, std=0.03),
           randn(KV_OUT, HIDDEN, std=0.03)]  # fmt: skip
    gate_up = [randn(MLP_OUT, HIDDEN, std=0.03), randn(MLP_OUT, HIDDEN, std=0.03)]
    rows = []
    with torch.inference_mode():
        for tokens in TOKENS:
            x = randn(tokens, HIDDEN, std=1.0)
            for name, weights in (("qkv", qkv), ("gate_up", gate_up)):
                row = {"tokens": tokens, "what": name, **compare(x, weights)}
                rows.append(row)
                print(json.dumps(row), flush=True)
    result = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
