"""Teacher-forced fidelity of the bf16 fast path: the same states through many forward passes.

    PYTHONPATH=REFSITE:. python3 bench/fidelity.py --workdir /tmp/fidelity --commit HASH \\
        --out bench/results/DATE-fidelity.json

One command: it writes the two full-size checkpoints it needs under --workdir if they are not
there (`plain`, and `confident`, whose audio head is as peaked as a trained model's), then for
each of them:

1. runs the reference `generate()` in float32 (TF32 off) on --items mixed items (default 64:
   auto voice, voice design, a 5 s clone prompt; greedy settings; GROUP items a call) and keeps
   the partially revealed state it feeds the network at the measured steps (first, quarter
   points, last);
2. gives each kept state to (a) the reference in float32, (b) the reference's own bf16 variants
   (`bench/fidelity_reference.py`: its attention backends, eager against compiled, the same
   items batched otherwise; `sdpa`, the reference as it runs, is `ref_bf16`) and (c) our
   runtime in bf16 exactly as the sidecar loads it (packed segments, FlashAttention varlen,
   torch.compile, CUDA graphs), and scores every arm's logits with the same decision code
   (`sidecar.runtime.generate.BatchState`: guidance, MASK forbidden, per-item top-k reveal);
3. per step, for every arm against (a): `kl` = mean KL(a || x) of the guided distribution of
   every still-masked position, `top1` = share of the positions (a) reveals at this step that x
   also reveals with the same token, `max_abs_logit_diff` over every target logit; and for (c)
   against `ref_bf16`, the paired difference of their top1 (`top1_paired`);
4. packing: each item's logits from our path alone and packed among 63 other requests of other
   kinds and lengths (half-revealed states).

Feeding the same state to every arm takes the cascades of free-running decoding out of the
measurement. A dry run on the CPU: `--device cpu --size tiny --items 6` (minutes).
`bench/fidelity_gate.py` judges the result: per step the variants' largest KL and
smallest top1 make the `band`, and ours must lie inside it plus a stated margin; the pooled
top1, bit-equal packing and our prompts as the reference's too. The result file is written
after each checkpoint; exits 1 unless green. Bench only: imports the reference.

Its parts: `fidelity_states.py` (1), `fidelity_reference.py` (the variants of 2),
`fidelity_scores.py` (3), `fidelity_packing.py` (4), `fidelity_arms.py` (one checkpoint, in that
order); this module is the command line and the result file.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import fidelity_gate
from fidelity_arms import measure
from fidelity_reference import DEFAULT, VARIANTS
from fidelity_states import STEPS

from sidecar.devtools.checkpoint import make_checkpoint
from sidecar.runtime.options import RuntimeOptions
from sidecar.shared.options import ATTENTION_KERNELS


def main() -> int:
    ap = argparse.ArgumentParser(description="teacher-forced fidelity of the bf16 fast path")
    ap.add_argument(
        "--workdir",
        type=Path,
        default=Path("/tmp/fidelity"),
        help="where the plain and confident checkpoints are (written if missing)",
    )
    ap.add_argument("--commit", required=True, help="the clean commit measured")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--size", default="full", help="checkpoint size (tiny: a quick CPU dry run)")
    ap.add_argument("--items", type=int, default=64, help="work items (agreement.py's first N)")
    ap.add_argument(
        "--attention",
        choices=ATTENTION_KERNELS,
        default=RuntimeOptions().attention,
        help="our packed segments' attention kernel (sidecar/runtime/options.py)",
    )
    ap.add_argument(
        "--variants",
        default=",".join(VARIANTS),
        help="the reference's bf16 variants that make the band (bench/fidelity_reference.py; "
        f"{DEFAULT} always runs)",
    )
    ap.add_argument(
        "--checkpoints",
        default="plain,confident",
        help="which of the two to measure (a run split over calls: bench/fidelity_gate.py "
        "judges the parts together)",
    )
    args = ap.parse_args()
    on_gpu = args.device.startswith("cuda")
    options = RuntimeOptions(attention=args.attention)
    result: dict[str, Any] = {
        "commit": args.commit,
        "gpu": torch.cuda.get_device_name(args.device) if on_gpu else "cpu",
        "torch": torch.__version__,
        "python": platform.python_version(),
        "steps_measured": list(STEPS),
        "fused_norm_rope": on_gpu,  # the runner's own choice: on a GPU in half precision
        "attention": options.attention,
        "checkpoints": {},
    }
    for name in args.checkpoints.split(","):
        path = args.workdir / name
        if not (path / "model.safetensors").is_file():
            print(f"writing the {name} checkpoint to {path}", flush=True)
            make_checkpoint(path, args.size, seed=0, confident=name == "confident")
        result["checkpoints"][name] = measure(
            path, args.device, args.items, options, args.variants.split(",")
        )
        print(json.dumps({name: result["checkpoints"][name]}), flush=True)
        failures = fidelity_gate.judge(result)  # written after each: a run cut short keeps it
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(fidelity_gate.report(result), flush=True)
    return 0 if not failures else 1


if __name__ == "__main__":
    raise SystemExit(main())
