"""Attention's q/k norm and rotary: sidecar/runtime/kernels/norm_rope.py's kernel against the kernels Inductor
makes for the same code compiled alone (dynamic shapes, eager rounding, as the layer stack is
compiled), on one GPU. Its kernels need not lay a row out as the stack's do: whether the stack's
logits change is `bench/forward_probes.sh --norm-rope`'s comparison.

For each tile (head rows per program, warps), compiled with and without floating-point
contraction (the op compiles without, as Inductor does when it emulates eager rounding), at each
token count: whether the kernel's q and k equal the compiled code's bit for bit (and how many
elements differ), and the time of both, each measured over a CUDA graph of back-to-back calls
(so that the compiled function's Python overhead is not counted). `--chains` instead counts the
unequal elements between eager PyTorch, the compiled code, the kernel (with and without
contraction) and the arithmetic written out with every rounding, or all but one.

    python3 bench/norm_rope_probe.py --tokens 540 4320 34560 --out norm_rope_probe.json
    python3 bench/norm_rope_probe.py --chains --tokens 4320

The inputs are random (q and k as N(0, 1) and N(0, 4) rows, norm weights near 1, rotary tables
of random positions up to 3,000): which elements land on a rounding boundary depends on the
values, so ~70 million elements at 64 items give the comparison its coverage.
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections.abc import Callable
from typing import Any

import torch

from sidecar.runtime.kernels import norm_rope
from sidecar.runtime.model import RMSNorm, rotate_half

HEADS, KV_HEADS, HEAD_DIM, EPS, THETA = 16, 8, 128, 1e-6, 1e6


def reference(
    q: torch.Tensor,
    k: torch.Tensor,
    q_norm: RMSNorm,
    k_norm: RMSNorm,
    cos: torch.Tensor,
    sin: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """`Attention.attend_packed`'s norm and rotary, as the layer stack runs them unfused."""
    q, k = q_norm(q), k_norm(k)
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def graph_ms(fn: Callable[[], Any], calls: int = 20, replays: int = 10) -> float:
    """Milliseconds a call, over a CUDA graph holding `calls` calls, replayed `replays` times."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    graph.replay()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(replays):
        graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / (calls * replays)


def inputs(tokens: int, seed: int) -> dict[str, Any]:
    gen = torch.Generator(device="cuda").manual_seed(seed)
    dev, bf16 = "cuda", torch.bfloat16
    q = (torch.randn(tokens, HEADS, HEAD_DIM, device=dev, generator=gen)).to(bf16)
    k = (2 * torch.randn(tokens, KV_HEADS, HEAD_DIM, device=dev, generator=gen)).to(bf16)
    norms = []
    for _ in range(2):
        norm = RMSNorm(HEAD_DIM, EPS).to(dev, bf16)
        with torch.no_grad():
            norm.weight.copy_(1 + 0.1 * torch.randn(HEAD_DIM, device=dev, generator=gen))
        norms.append(norm)
    positions = torch.randint(0, 3000, (tokens,), device=dev, generator=gen)
    exponents = torch.arange(0, HEAD_DIM, 2, device=dev).float() / HEAD_DIM
    freqs = positions[:, None].float() / (THETA**exponents)
    emb = torch.cat((freqs, freqs), dim=-1)
    return {
        "q": q,
        "k": k,
        "q_norm": norms[0],
        "k_norm": norms[1],
        "cos": emb.cos().to(bf16),
        "sin": emb.sin().to(bf16),
    }


def through_op(x: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    """q and k through the op, as the layer stack calls it (the module's tile, no contraction)."""
    return tuple(
        torch.ops.omnivoice.norm_rope(x[n], x[f"{n}_norm"].weight, x["cos"], x["sin"], EPS)
        for n in "qk"
    )


def unequal(a: torch.Tensor, b: torch.Tensor) -> int:
    return int((a.view(torch.int16) != b.view(torch.int16)).sum())


def variant(
    x: dict[str, Any],
    want: tuple[torch.Tensor, torch.Tensor],
    rows: int,
    warps: int,
    fusion: bool,
) -> dict[str, Any]:
    """The kernel at one tile, with or without contraction: its q and k against the compiled
    code's, and its time."""
    got = torch.empty_like(x["q"]), torch.empty_like(x["k"])

    def both() -> None:
        for name, out in zip("qk", got, strict=True):
            norm_rope.launch(
                x[name], x[f"{name}_norm"].weight, x["cos"], x["sin"], EPS, out,
                rows_per_program=rows, num_warps=warps, fp_fusion=fusion,
            )  # fmt: skip

    both()
    return {
        "rows": rows,
        "warps": warps,
        "fp_fusion": fusion,
        "q_unequal": unequal(got[0], want[0]),
        "k_unequal": unequal(got[1], want[1]),
        "max_abs_diff": max(float((g.float() - w.float()).abs().max()) for g, w in zip(got, want)),
        "ms": round(graph_ms(both), 4),
    }


def probe(tokens: int, args: argparse.Namespace, compiled: Callable[..., Any]) -> dict[str, Any]:
    x = inputs(tokens, seed=tokens)
    want = compiled(**x)
    row: dict[str, Any] = {
        "tokens": tokens,
        "inductor_ms": round(graph_ms(lambda: compiled(**x)), 4),
    }
    for name, got, wanted in zip("qk", through_op(x), want, strict=True):
        row[f"op_{name}_unequal"] = unequal(got, wanted)
    variants = [
        variant(x, want, rows, warps, fusion)
        for rows, warps, fusion in itertools.product(args.rows, args.warps, (False, True))
    ]
    row["variants"] = sorted(variants, key=lambda v: v["ms"])
    equal = [v for v in variants if v["q_unequal"] == 0 and v["k_unequal"] == 0]
    row["fastest_equal"] = min(equal, key=lambda v: v["ms"]) if equal else None
    return row


def chain(x: dict[str, Any], name: str, skip: str = "") -> torch.Tensor:
    """The norm and rotary written out in float32 with each bf16 rounding explicit; `skip` names
    one rounding to leave out ("xs": x times the scale, "w": times the weight, "products": the
    two rotary products before their sum), to see which one two implementations disagree on."""

    def rounded(t: torch.Tensor, step: str) -> torch.Tensor:
        return t if step == skip else t.to(torch.bfloat16).float()

    v, w = x[name].float(), x[f"{name}_norm"].weight.float()
    cos, sin = x["cos"].float().unsqueeze(1), x["sin"].float().unsqueeze(1)
    scale = torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + EPS)
    q = rounded(w * rounded(v * scale, "xs"), "w")
    return rounded(rounded(q * cos, "products") + rounded(rotate_half(q) * sin, "products"), "sum")


def chains(tokens: int, compiled: Callable[..., Any]) -> dict[str, Any]:
    """Unequal elements between the eager code, the compiled code, the kernel and the chains."""
    x = inputs(tokens, seed=tokens)
    results = {"eager": reference(**x), "compiled": compiled(**x)}
    results["kernel"] = through_op(x)
    fused = torch.empty_like(x["q"]), torch.empty_like(x["k"])
    for n, out in zip("qk", fused, strict=True):
        norm_rope.launch(x[n], x[f"{n}_norm"].weight, x["cos"], x["sin"], EPS, out, fp_fusion=True)
    results["kernel_fp_fusion"] = fused
    for skip in ("", "xs", "w", "products"):
        results[f"chain_skip_{skip or 'none'}"] = tuple(
            chain(x, n, skip).to(torch.bfloat16) for n in "qk"
        )
    report: dict[str, Any] = {"tokens": tokens}
    for a, b in itertools.combinations(results, 2):
        report[f"{a}_vs_{b}"] = [unequal(s, t) for s, t in zip(results[a], results[b], strict=True)]
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, nargs="+", default=[540, 4320, 34560])
    parser.add_argument("--rows", type=int, nargs="+", default=[8, 16, 32, 64])
    parser.add_argument("--warps", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--chains", action="store_true", help="only `chains`, at the first count")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    compiled = torch.compile(reference, dynamic=True, options={"emulate_precision_casts": True})
    results = []
    with torch.no_grad():
        if args.chains:
            print(json.dumps(chains(args.tokens[0], compiled), indent=1))
            return
        for tokens in args.tokens:
            row = probe(tokens, args, compiled)
            results.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "variants"}), flush=True)
    report = {"elements": "q [tokens, 16, 128] and k [tokens, 8, 128], bf16", "rows": results}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
