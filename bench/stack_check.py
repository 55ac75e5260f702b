"""The compiled layer stack against eager PyTorch on the GPU: one packed forward pass of items of
different lengths, both ways, and how far apart their logits are.

    python bench/stack_check.py CHECKPOINT --save logits.pt    # then compare two commits' files:
    python bench/stack_check.py --compare a.pt b.pt

`--save` keeps the compiled logits, so two versions of the runtime can be compared bit for bit
(a change meant to move work, not to change results, must leave them equal).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from profile_step import TEXT

from sidecar.runtime.generate import BatchState
from sidecar.runtime.omnivoice import OmniVoice
from sidecar.runtime.options import RuntimeOptions
from sidecar.runtime.request import GenerationRequest


def logits(checkpoint: str, device: str, compile: bool, items: int) -> torch.Tensor:
    model = OmniVoice.load(
        checkpoint,
        device=device,
        dtype="bfloat16",
        options=RuntimeOptions(cuda_graphs=False, compile=compile),
    )
    words = TEXT.split()
    requests = [
        GenerationRequest(text=" ".join(words[: 6 + (i * 7) % len(words)]), seed=i)
        for i in range(items)
    ]
    normalised = [model.prompter.prepare(r) for r in requests]
    prompts = [model.prompter.prompt(it, it.text, it.target_len, None, None) for it in normalised]
    with torch.inference_mode():
        state = BatchState(model.model, prompts, model.runner)
        return state.forward().float().cpu()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint", nargs="?")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--items", type=int, default=16)
    ap.add_argument("--save", type=Path)
    ap.add_argument("--compare", type=Path, nargs=2)
    args = ap.parse_args()
    if args.compare:
        a, b = (torch.load(p) for p in args.compare)
        row = {
            "equal": bool(torch.equal(a, b)),
            "max_abs_diff": float((a - b).abs().max()),
            "share_equal": float((a == b).float().mean()),
            "top1_agreement": float((a.argmax(-1) == b.argmax(-1)).float().mean()),
        }
    else:
        compiled = logits(args.checkpoint, args.device, True, args.items)
        eager = logits(args.checkpoint, args.device, False, args.items)
        row = {
            "positions": compiled.shape[0],
            "compiled_equals_eager": bool(torch.equal(compiled, eager)),
            "max_abs_diff_to_eager": float((compiled - eager).abs().max()),
            "mean_abs_diff_to_eager": float((compiled - eager).abs().mean()),
            "top1_agreement_with_eager": float(
                (compiled.argmax(-1) == eager.argmax(-1)).float().mean()
            ),
        }
        if args.save:
            torch.save(compiled, args.save)
    print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
