"""The fidelity gate's decision (bench/fidelity_gate.py) on small made-up results: the band from
the variants, ours inside or outside it, the run's other conditions, the command's exit code.
The measurement itself needs a GPU and the reference package (bench/fidelity.py)."""

from __future__ import annotations

import copy
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench import fidelity_gate as gate

GATE = Path(__file__).resolve().parents[2] / "bench" / "fidelity_gate.py"
SE = 0.005  # the paired standard error of every made-up step


def arm(kl: float, top1: float) -> dict[str, float]:
    return {"kl": kl, "top1": top1}


def step(number: int, ours: dict[str, float]) -> dict[str, Any]:
    variants = {
        "sdpa": arm(0.0100, 0.80),
        "eager": arm(0.0104, 0.78),
        "compiled": arm(0.0098, 0.81),
    }
    return {
        "step": number,
        "ref_bf16": variants["sdpa"],
        "ours_bf16": ours,
        "top1_paired": {"standard_error": SE},
        "variants": variants,
    }


def checkpoint(ours: dict[str, float]) -> dict[str, Any]:
    return {
        "steps": [step(0, ours), step(16, arm(0.0100, 0.80))],
        "top1_all_steps": {"ref_bf16": 0.80, "ours_bf16": 0.80},
        "packing": {"max_abs_logit_diff": 0.0},
        "prompts_equal_to_ours": True,
    }


def result(ours: dict[str, float], commit: str = "abc1234") -> dict[str, Any]:
    return {
        "commit": commit,
        "checkpoints": {"plain": checkpoint(ours), "confident": checkpoint(arm(0.0100, 0.80))},
    }


def test_band_is_the_largest_kl_and_the_smallest_top1_of_the_variants() -> None:
    variants = step(0, arm(0, 0))["variants"]
    assert gate.band(variants) == {"kl_max": 0.0104, "top1_min": 0.78}


def test_ours_inside_the_band_is_green_and_each_step_carries_its_band() -> None:
    r = result(arm(0.0101, 0.79))
    assert gate.judge(r) == []
    assert r["green"] is True
    first = r["checkpoints"]["plain"]["steps"][0]
    assert first["band"] == {"kl_max": 0.0104, "top1_min": 0.78}
    assert first["inside_band"] is True
    assert first["allowed"]["kl"] == pytest.approx(0.0104 * (1 + gate.KL_MARGIN))
    assert first["allowed"]["top1"] == pytest.approx(0.78 - gate.TOP1_SE * SE)
    assert "band" in r["rule"]


@pytest.mark.parametrize(
    ("ours", "inside"),
    [
        # KL: the band's top is 0.0104; the margin lets 1 % more through, no further.
        (arm(0.0104 * (1 + gate.KL_MARGIN) * 0.999, 0.80), True),
        (arm(0.0104 * (1 + gate.KL_MARGIN) * 1.001, 0.80), False),
        # top1: the band's bottom is 0.78; the margin is two paired standard errors below it.
        (arm(0.0100, 0.78 - gate.TOP1_SE * SE + 1e-4), True),
        (arm(0.0100, 0.78 - gate.TOP1_SE * SE - 1e-4), False),
    ],
)
def test_the_margin_is_where_the_band_ends(ours: dict[str, float], inside: bool) -> None:
    r = result(ours)
    failures = gate.judge(r)
    assert r["green"] is inside
    assert r["checkpoints"]["plain"]["steps"][0]["inside_band"] is inside
    assert all(f.startswith("plain step 0: ") for f in failures)
    assert len(failures) == (0 if inside else 1)


def test_a_kl_outside_the_reference_bf16_alone_but_inside_the_band_is_green() -> None:
    """The old rule (1 % over the reference as it runs) would fail this; the band does not."""
    r = result(arm(0.0100 * 1.03, 0.80))
    assert gate.judge(r) == []


def spoil(r: dict[str, Any], how: str) -> None:
    c = r["checkpoints"]["confident"]
    if how == "few_variants":
        for name in ("eager", "compiled"):
            del c["steps"][1]["variants"][name]
    elif how == "pooled_top1":
        c["top1_all_steps"]["ours_bf16"] = 0.80 - gate.POOLED_TOP1_SLACK - 1e-3
    elif how == "packing":
        c["packing"]["max_abs_logit_diff"] = 2.0**-10  # bf16 noise is no longer enough
    elif how == "prompts":
        c["prompts_equal_to_ours"] = False
    elif how == "missing":
        del r["checkpoints"]["confident"]
    elif how == "nan_variant":
        c["steps"][1]["variants"]["eager"]["kl"] = math.nan
    elif how == "nan_ours":
        c["steps"][1]["ours_bf16"]["kl"] = math.nan


@pytest.mark.parametrize(
    ("how", "says"),
    [
        ("few_variants", "confident step 16: a band of 1 variants"),
        ("pooled_top1", "confident all steps: top1"),
        ("packing", "confident: packing changes logits"),
        ("prompts", "confident: our prompt builder"),
        ("missing", "confident: not measured"),
        ("nan_variant", "confident step 16: a variant's KL or top1 is not a number"),
        ("nan_ours", "confident step 16: KL nan >"),
    ],
)
def test_each_other_condition_makes_the_run_red(how: str, says: str) -> None:
    r = result(arm(0.0100, 0.80))
    spoil(r, how)
    failures = gate.judge(r)
    assert r["green"] is False
    assert len(failures) == 1 and failures[0].startswith(says)


def write(path: Path, r: dict[str, Any]) -> Path:
    path.write_text(json.dumps(r))
    return path


def split(r: dict[str, Any], tmp_path: Path) -> list[Path]:
    """The result as two files, one a checkpoint, as a run split over two calls leaves it."""
    paths = []
    for name, c in r["checkpoints"].items():
        part = copy.deepcopy(r)
        part["checkpoints"] = {name: c}
        paths.append(write(tmp_path / f"{name}.json", part))
    return paths


def test_the_command_merges_parts_writes_the_verdict_and_exits_by_it(tmp_path: Path) -> None:
    green = split(result(arm(0.0101, 0.79)), tmp_path)
    out = tmp_path / "judged.json"
    assert gate.main([*map(str, green), "--out", str(out)]) == 0
    judged = json.loads(out.read_text())
    assert judged["green"] is True and set(judged["checkpoints"]) == {"plain", "confident"}
    assert judged["checkpoints"]["confident"]["steps"][1]["band"]["top1_min"] == 0.78
    assert gate.main([str(green[0])]) == 1  # one checkpoint alone is not the gate


def test_parts_of_different_commits_are_not_judged_together(tmp_path: Path) -> None:
    a = write(tmp_path / "a.json", result(arm(0.01, 0.8), commit="aaaaaaa"))
    b = write(tmp_path / "b.json", result(arm(0.01, 0.8), commit="bbbbbbb"))
    assert gate.main([str(a), str(b)]) == 2


def test_the_exit_status_outside_the_band_is_not_zero(tmp_path: Path) -> None:
    red = write(tmp_path / "red.json", result(arm(0.02, 0.80)))
    run = subprocess.run(
        [sys.executable, str(GATE), str(red)], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 1
    assert "NOT green" in run.stdout and "plain step 0: KL 0.02 >" in run.stdout
    lines = run.stdout.splitlines()
    assert lines[0].startswith("plain step  0: KL 0.02 (band 0.0104, allowed 0.0105)")
    assert lines[0].endswith("OUTSIDE") and not lines[1].endswith("OUTSIDE")
