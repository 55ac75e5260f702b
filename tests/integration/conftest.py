"""Fixtures for tests that run real sidecar processes."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def one_thread_per_sidecar(monkeypatch: pytest.MonkeyPatch) -> None:
    """CPU sidecars inherit this. On a 2-core CI machine shared with the test process, torch's
    spinning OpenMP threads make a tiny-checkpoint batch 40x slower (4 s instead of 0.1 s)."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
