"""The `omnivoice-supervisor parity` command, run as a user runs it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np


def run_parity(fixtures: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "supervisor", "parity", str(fixtures)],
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_shared_fixtures_pass_every_case(fixtures_dir: Path, cases: dict) -> None:
    proc = run_parity(fixtures_dir)
    lines = proc.stdout.strip().splitlines()
    sections = [k for k, v in cases.items() if isinstance(v, list)] + ["audio"]
    assert [line.split(":")[0] for line in lines[:-1]] == sections
    total = sum(len(cases[s]) for s in sections[:-1]) + 6
    assert lines[-1] == f"parity: {total}/{total} passed", proc.stderr
    assert proc.returncode == 0


def test_a_wrong_expectation_fails_its_case_and_the_run(fixtures_dir: Path, tmp_path: Path) -> None:
    fixtures = tmp_path / "fixtures"
    shutil.copytree(fixtures_dir / "checkpoint", fixtures / "checkpoint")
    cases = json.loads((fixtures_dir / "cases.json").read_text())
    small = {
        "languages": cases["languages"][:3],
        "generate": [g for g in cases["generate"] if g["name"] == "auto_en"],
    }
    small["languages"][1] = {**small["languages"][1], "out": "not-a-language"}
    (fixtures / "cases.json").write_text(json.dumps(small))
    with np.load(fixtures_dir / "expected.npz") as npz:
        arrays = {k: npz[k] for k in npz.files}
    arrays["gen_auto_en_0_tokens"] = arrays["gen_auto_en_0_tokens"].copy()
    arrays["gen_auto_en_0_tokens"][3, 7] = (arrays["gen_auto_en_0_tokens"][3, 7] + 1) % 1024
    np.savez(fixtures / "expected.npz", **arrays)

    proc = run_parity(fixtures)
    assert proc.returncode == 1
    assert proc.stdout.splitlines() == [
        "languages: 2/3",
        "generate: 0/1",
        "audio: 6/6",
        "parity: 8/10 passed",
    ]
    assert "1 of 384 tokens differ" in proc.stderr


def test_a_directory_without_fixtures_is_refused(tmp_path: Path) -> None:
    proc = run_parity(tmp_path)
    assert proc.returncode == 2
    assert "not a fixtures directory" in proc.stderr


def test_a_section_without_a_check_fails_under_its_own_name(
    fixtures_dir: Path, tmp_path: Path
) -> None:
    """Each case of an unknown section names that section (it once named the last section read)."""
    fixtures = tmp_path / "fixtures"
    shutil.copytree(fixtures_dir / "checkpoint", fixtures / "checkpoint")
    shutil.copy(fixtures_dir / "expected.npz", fixtures / "expected.npz")
    languages = json.loads((fixtures_dir / "cases.json").read_text())["languages"][:1]
    (fixtures / "cases.json").write_text(
        json.dumps({"brand_new": [{"name": "x"}], "languages": languages})
    )

    proc = run_parity(fixtures)
    assert proc.returncode == 1
    assert proc.stdout.splitlines() == [
        "brand_new: 0/1",
        "languages: 1/1",
        "audio: 6/6",
        "parity: 7/8 passed",
    ]
    assert "brand_new[x]: no check for section 'brand_new'" in proc.stderr
