"""The fidelity gate's decision: a band from the reference's own bf16 variants, ours inside it.

    python3 bench/fidelity_gate.py PLAIN.json CONFIDENT.json --out fidelity.json

`bench/fidelity.py` measures, at each step of each checkpoint, the KL and top-1 of every arm
against the reference in float32: ours, and the reference's own equally valid bf16 variants
(`bench/fidelity_reference.py`). This module turns those figures into the verdict, and as a
command judges saved results again: a run split over several calls (one file per checkpoint)
is merged and judged as one. It exits 1 unless the run is green. No torch: it reads numbers.

Green means, on both checkpoints:

- at every step, ours inside the band the variants make, plus a margin: KL at most
  `band.kl_max` x (1 + KL_MARGIN); top-1 at least `band.top1_min` less TOP1_SE paired standard
  errors of ours against the reference as it runs (`top1_paired`: at a step that reveals a few
  hundred positions a point is a handful of near-ties);
- over all steps together, ours' top-1 at most POOLED_TOP1_SLACK below the reference bf16's;
- each item's logits alone and packed among other requests equal bit for bit;
- our prompt builder giving the reference's tokens;
- a band made of at least MIN_VARIANTS variants at every step.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

KL_MARGIN = 0.01  # ours' KL may exceed the band's top by 1 % of it
TOP1_SE = 2.0  # ours' top-1 may fall this many paired standard errors below the band's bottom
POOLED_TOP1_SLACK = 0.01  # over all steps: at most 1 point below the reference bf16's top-1
MIN_VARIANTS = 3  # fewer is not a spread
CHECKPOINTS = ("plain", "confident")

RULE = (
    f"per step: KL <= band.kl_max * {1 + KL_MARGIN:g} and top1 >= band.top1_min - "
    f"{TOP1_SE:g} paired standard errors (ours against the reference bf16); the band is the "
    "largest KL and the smallest top1 of the reference's own bf16 variants, at least "
    f"{MIN_VARIANTS} of them; over all steps top1 >= the reference bf16's - "
    f"{POOLED_TOP1_SLACK:g}; packing bit-equal; prompts equal; checkpoints "
    f"{', '.join(CHECKPOINTS)}"
)


def band(variants: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """The spread of the variants at one step: the largest KL and the smallest top-1."""
    return {
        "kl_max": max(v["kl"] for v in variants.values()),
        "top1_min": min(v["top1"] for v in variants.values()),
    }


def allowed(step: Mapping[str, Any]) -> dict[str, float]:
    """The band of one step widened by the margins: the most KL and the least top-1 ours may have."""
    b = step["band"]
    return {
        "kl": b["kl_max"] * (1 + KL_MARGIN),
        "top1": b["top1_min"] - TOP1_SE * step["top1_paired"]["standard_error"],
    }


def judge_step(name: str, step: dict[str, Any]) -> list[str]:
    """Sets the step's `band`, `allowed` and `inside_band`; returns its failures as sentences."""
    where = f"{name} step {step['step']}"
    variants = step.get("variants") or {}
    if len(variants) < MIN_VARIANTS:
        step["band"], step["allowed"], step["inside_band"] = None, None, False
        return [f"{where}: a band of {len(variants)} variants (at least {MIN_VARIANTS})"]
    step["band"] = band(variants)
    step["allowed"] = limit = allowed(step)
    ours, failures = step["ours_bf16"], []
    if not all(math.isfinite(v[k]) for v in variants.values() for k in ("kl", "top1")):
        failures.append(f"{where}: a variant's KL or top1 is not a number")
    # Written so that a NaN fails: every comparison with one is false.
    if not ours["kl"] <= limit["kl"]:
        failures.append(
            f"{where}: KL {ours['kl']:.4g} > {limit['kl']:.4g} "
            f"(band top {step['band']['kl_max']:.4g})"
        )
    if not ours["top1"] >= limit["top1"]:
        failures.append(
            f"{where}: top1 {ours['top1']:.4f} < {limit['top1']:.4f} "
            f"(band bottom {step['band']['top1_min']:.4f})"
        )
    step["inside_band"] = not failures
    return failures


def judge_checkpoint(name: str, c: dict[str, Any]) -> list[str]:
    failures = [f for s in c["steps"] for f in judge_step(name, s)]
    pooled = c["top1_all_steps"]
    if not pooled["ours_bf16"] >= pooled["ref_bf16"] - POOLED_TOP1_SLACK:
        failures.append(
            f"{name} all steps: top1 {pooled['ours_bf16']:.4f} < {pooled['ref_bf16']:.4f} - "
            f"{POOLED_TOP1_SLACK}"
        )
    p = c["packing"]
    if p["max_abs_logit_diff"] != 0:
        failures.append(
            f"{name}: packing changes logits by {p['max_abs_logit_diff']:.3g} (bit-equal required)"
        )
    if not c["prompts_equal_to_ours"]:
        failures.append(f"{name}: our prompt builder makes other tokens than the reference's")
    return failures


def judge(result: dict[str, Any]) -> list[str]:
    """Judges a fidelity result in place (per step `band`, `allowed`, `inside_band`; `green`,
    `failures`, `rule` for the run) and returns its failures (empty: green)."""
    checkpoints = result.get("checkpoints", {})
    failures = [f"{n}: not measured" for n in CHECKPOINTS if n not in checkpoints]
    for name, c in checkpoints.items():
        failures += judge_checkpoint(name, c)
    result["green"] = not failures
    result["failures"] = failures
    result["rule"] = RULE
    return failures


def merge(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Several results of one commit (a run split by --checkpoints) as one."""
    commits = {r.get("commit") for r in results}
    if len(commits) != 1:
        raise ValueError(f"results of different commits: {sorted(map(str, commits))}")
    merged = {k: v for k, v in results[0].items() if k != "checkpoints"}
    merged["checkpoints"] = {}
    for r in results:
        for name, c in r["checkpoints"].items():
            if name in merged["checkpoints"]:
                raise ValueError(f"checkpoint {name} measured twice")
            merged["checkpoints"][name] = c
    return merged


def summary(result: Mapping[str, Any]) -> list[str]:
    """One line a judged step: ours against the band and what the margins allow."""
    lines = []
    for name, c in result.get("checkpoints", {}).items():
        for s in c["steps"]:
            b, a, ours = s.get("band"), s.get("allowed"), s["ours_bf16"]
            if b is None or a is None:
                continue
            lines.append(
                f"{name} step {s['step']:>2}: KL {ours['kl']:.4g} (band {b['kl_max']:.4g}, "
                f"allowed {a['kl']:.4g}); top1 {ours['top1']:.4f} (band {b['top1_min']:.4f}, "
                f"allowed {a['top1']:.4f}){'' if s['inside_band'] else '  OUTSIDE'}"
            )
    return lines


def report(result: Mapping[str, Any]) -> str:
    """The judged result for a reader: each step, then the verdict."""
    failures = result["failures"]
    verdict = "green" if not failures else "NOT green:\n  " + "\n  ".join(failures)
    return "\n".join([*summary(result), verdict])


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="judge saved fidelity results (bench/fidelity.py)")
    ap.add_argument("results", nargs="+", type=Path, help="result files of one commit")
    ap.add_argument("--out", type=Path, help="where to write the judged (merged) result")
    args = ap.parse_args(argv)
    try:
        result = merge([json.loads(p.read_text()) for p in args.results])
    except (OSError, ValueError, KeyError) as e:
        print(f"cannot judge: {e}", file=sys.stderr)
        return 2
    failures = judge(result)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(report(result), flush=True)
    return 0 if not failures else 1


if __name__ == "__main__":
    raise SystemExit(main())
