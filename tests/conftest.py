"""Shared test fixtures: the parity fixtures shipped beside the repository."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
FIXTURES_DIR = REPO_ROOT.parent / "shared" / "parity" / "fixtures"


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    if not FIXTURES_DIR.is_dir():
        pytest.skip(
            f"parity fixtures not found at {FIXTURES_DIR} (CI lays shared/ beside the clone)"
        )
    return FIXTURES_DIR


@pytest.fixture(scope="session")
def cases(fixtures_dir: Path) -> dict:
    return json.loads((fixtures_dir / "cases.json").read_text())


@pytest.fixture(scope="session")
def expected(fixtures_dir: Path) -> dict[str, np.ndarray]:
    with np.load(fixtures_dir / "expected.npz") as npz:
        return {k: npz[k] for k in npz.files}


@pytest.fixture(scope="session")
def checkpoint_dir(fixtures_dir: Path) -> Path:
    return fixtures_dir / "checkpoint"
