"""Shared test fixtures: the parity fixtures shipped beside the repository; sidecars with their
test faults; and Ctrl-C as a terminal delivers it, however the suite was started."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from supervisor.supervision import sidecar_command
from tests.helpers.faulty_server import FAULTY_SIDECAR
from tests.helpers.paths import REPO_ROOT
from tests.helpers.pg_cluster import Cluster, running

FIXTURES_DIR = REPO_ROOT.parent / "shared" / "parity" / "fixtures"


def pytest_configure(config: pytest.Config) -> None:
    # A suite started in the background (`pytest &`, nohup) inherits SIGINT ignored, and so would
    # every process it starts: the tests that send `synth` a real Ctrl-C would wait for nothing.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session", autouse=True)
def faulty_sidecars() -> Iterator[None]:
    """Every sidecar a test's own pool starts runs the test entry point, whose hooks honour fault
    markers (sidecar/devtools/faults.py): production has no such setting. Servers started as
    processes get the same through tests/helpers/faulty_server.py."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sidecar_command, "SIDECAR_MODULE", FAULTY_SIDECAR)
        yield


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


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Cluster]:
    """One real PostgreSQL server for the session (tests/helpers/pg_cluster.py)."""
    with running() as cluster:
        if cluster is None:
            pytest.skip("PostgreSQL is not installed (Debian: apt-get install postgresql)")
        yield cluster


@pytest.fixture
def pg_url(pg_cluster: Cluster) -> str:
    """A fresh database on the session's PostgreSQL server."""
    return pg_cluster.new_database()


@pytest.fixture(scope="session")
def whisper_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Whisper (`make-checkpoint --kind whisper`), for the ASR sidecar."""
    from sidecar.devtools.whisper_checkpoint import make_whisper_checkpoint

    out = tmp_path_factory.mktemp("whisper")
    make_whisper_checkpoint(out)
    return out
