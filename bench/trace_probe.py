"""A start's compilation of the layer stack on the CPU, with and without trace_once's seed.

    python3 bench/trace_probe.py plain --cache /tmp/probe-cache [--layers 28]    # twice: cold, warm
    python3 bench/trace_probe.py seeded --cache /tmp/probe-cache [--layers 28]
    python3 bench/trace_probe.py plain --no-regions --cache /tmp/probe-whole  # compiled whole

Each run is one process, as a start is: the full-size backbone's shapes (random weights, bf16,
`--layers` of them), torch.compile as the runner compiles it (dynamic shapes, eager rounding),
Inductor's cache in `--cache`, and one call at 512 tokens. FlashAttention does not run on the
CPU: a custom op with its signature stands in (as the fused norm-and-rotary op does on the GPU,
it takes a Python float, which is what makes torch trace twice). `plain` traces as before
sidecar/runtime/trace_once.py; `seeded` runs inside `trace_once.seeded`, which records the floats
torch specialized (the first time) and gives them back (after). Prints the first call's
seconds, torch.compile's phases (a second trace shows as `compile_attempt_1`), and the
AOTAutograd and Inductor cache counters; `--out` keeps the output, to compare runs bit for bit
(`--compare A B`).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import sys
import time
from pathlib import Path

import torch

PHASES = (
    "bytecode_tracing",
    "compile_attempt_0",
    "compile_attempt_1",
    "create_aot_dispatcher_function",
    "compile_fx.<locals>.fw_compiler_base",
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=("plain", "seeded", "compare"))
    ap.add_argument("files", nargs="*", type=Path, help="compare: two --out files")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/probe-cache"))
    ap.add_argument("--layers", type=int, default=28)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument(
        "--regions",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="compiled by regions (regions.py, as the runtime does) or whole, as one function",
    )
    args = ap.parse_args()
    if args.mode == "compare":
        a, b = (torch.load(f) for f in args.files)
        print("bit-equal" if torch.equal(a, b) else "DIFFERENT")
        return 0
    from sidecar.runtime import compile_cache

    compile_cache.use(str(args.cache))  # Inductor's cache, and trace_once's seed beside it
    out = run(args.layers, args.mode == "seeded", args.regions)
    if args.out is not None:
        torch.save(out, args.out)
    return 0


@torch.library.custom_op("trace_probe::attention", mutates_args=())
def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens: torch.Tensor,
    cap: int,
    scale: float,
) -> torch.Tensor:
    """FlashAttention's place: its arguments, any arithmetic."""
    return q * scale + v.repeat_interleave(q.shape[1] // v.shape[1], dim=1)


@attention.register_fake
def _(q: torch.Tensor, *rest: object) -> torch.Tensor:
    return torch.empty_like(q)


def stand_in(q, k, v, cu_seqlens, cap, scale, *kernel):  # type: ignore[no-untyped-def]
    return torch.ops.trace_probe.attention(q, k, v, cu_seqlens, cap, scale)


def run(layers: int, seeded: bool, regions: bool) -> object:
    from torch._dynamo.utils import compile_times, counters

    import sidecar.runtime.model as model_module
    from sidecar.devtools.checkpoint import SIZES, omnivoice_config
    from sidecar.runtime import trace_once
    from sidecar.runtime.config import ModelConfig
    from sidecar.runtime.regions import EAGER_ROUNDING, compiled_stack

    model_module.varlen_attention = stand_in
    full = ModelConfig.from_dict(omnivoice_config(SIZES["full"]), where="full")
    cfg = dataclasses.replace(full, num_layers=layers)
    torch.manual_seed(0)
    model = model_module.OmniVoiceModel(cfg).to(torch.bfloat16).eval()
    n = 512
    ids = torch.randint(0, 1000, (cfg.num_codebooks, n), generator=torch.Generator().manual_seed(1))
    positions, cu_seqlens = torch.arange(n), torch.full((129,), n, dtype=torch.int32)
    cu_seqlens[0] = 0
    cos, sin = model.llm.rope(positions, torch.bfloat16)
    stack = (
        compiled_stack(model)  # as the runner does
        if regions
        else torch.compile(model.stack_packed, dynamic=True, options=dict(EAGER_ROUNDING))
    )
    began = time.perf_counter()
    seed = trace_once.seeded("trace_probe") if seeded else contextlib.nullcontext()
    with torch.inference_mode(), seed:
        out = stack(ids, torch.zeros(n, dtype=torch.bool), cos, sin, cu_seqlens, 300, positions)
    how = ("seeded" if seeded else "plain") + (", by regions" if regions else "")
    print(f"first call {time.perf_counter() - began:.2f} s ({how})")
    names, seconds = compile_times("csv", aggregate=True)
    spent = dict(zip(names, seconds, strict=True))
    print("phases:", {k: round(float(str(spent[k])), 2) for k in PHASES if k in spent})
    print("caches:", {g: dict(counters[g]) for g in ("aot_autograd", "inductor")})
    return out


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "2")
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.exit(main())
