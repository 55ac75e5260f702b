"""sidecar/serve/spare.py: a spare (`--park`) loads what needs no device, parks, and goes on
only when told `go`; told anything else, or left without stdin, it ends before its device."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from sidecar.shared.ops import FROM_SIDECAR
from sidecar.shared.protocol import PARKED, ExitCode, read_frame, write_frame

MAX = 1 << 20


def start_parked() -> tuple[subprocess.Popen[bytes], list[str]]:
    """A null-engine spare, read up to its `parked`; the stages it announced on the way."""
    argv = [sys.executable, "-m", "sidecar", "--engine", "null", "--warmup-steps", "0", "--park"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    stages: list[str] = []
    while PARKED not in stages:
        frame = read_frame(proc.stdout, MAX, FROM_SIDECAR)  # type: ignore[arg-type]
        assert frame is not None and frame["op"] in ("hello", "progress"), frame
        if frame["op"] == "progress":
            stages.append(frame["stage"])
    return proc, stages


@pytest.mark.parametrize("told", ["go", "shutdown", None], ids=["go", "shutdown", "eof"])
def test_a_parked_spare_goes_on_only_when_told_go(told: str | None) -> None:
    proc, stages = start_parked()
    assert proc.stdin is not None and proc.stdout is not None
    try:
        assert stages == ["start", "null engine", PARKED]
        if told is not None:
            write_frame(proc.stdin, {"op": told})  # type: ignore[arg-type, misc]
        if told != "go":
            proc.stdin.close()
            assert read_frame(proc.stdout, MAX, FROM_SIDECAR) is None  # ended without `ready`
            assert proc.wait(30) == ExitCode.OK
            return
        ready = read_frame(proc.stdout, MAX, FROM_SIDECAR)
        assert ready is not None and ready["op"] == "ready", ready
        proc.stdin.close()  # a loaded sidecar ends at the end of its stdin
        assert proc.wait(30) == ExitCode.OK
    finally:
        proc.kill()
        proc.wait()
        proc.stdin.close()
        proc.stdout.close()
