"""The sidecar's interpreter command line imports installed code only, on every Python we allow."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from supervisor.supervision.sidecar_command import sidecar_command


@pytest.mark.parametrize("version", [(3, 10), (3, 11)])
def test_a_local_sidecar_folder_does_not_shadow_the_installed_one(
    tmp_path: Path, version: tuple[int, int]
) -> None:
    """Both forms (3.10's bootstrap runs on any Python) reach the real sidecar's argument parser,
    not the decoy in the working directory."""
    (tmp_path / "sidecar").mkdir()
    (tmp_path / "sidecar" / "__init__.py").write_text(
        "raise SystemExit('the local sidecar/ was imported')\n"
    )
    (tmp_path / "sidecar" / "__main__.py").write_text(
        "raise SystemExit('the local sidecar/ was imported')\n"
    )
    done = subprocess.run(
        [*sidecar_command(sys.executable, version), "--help"],
        cwd=tmp_path,
        capture_output=True,
        timeout=120,
    )
    log = done.stderr.decode()  # the sidecar moves fd 1 to stderr: stdout carries frames only
    assert "local sidecar" not in log
    assert done.returncode == 0 and "--engine" in log, log
