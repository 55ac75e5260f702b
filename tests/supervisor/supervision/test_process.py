"""supervisor/supervision/process.py: one child, its frames, its stderr, and a kill that takes its whole group."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from collections.abc import Callable

import psutil
import pytest

from sidecar.shared.protocol import PROTOCOL_VERSION
from supervisor.supervision.gpu import CPU
from supervisor.supervision.process import (
    TRANSITIONS,
    KillReason,
    SidecarProcess,
    SidecarState,
    decode_exit,
)
from tests.helpers.harness import wait_for


@pytest.mark.parametrize(
    ("code", "ours", "text"),
    [
        (0, False, "exited with status 0 (ok)"),
        (3, False, "exited with status 3 (load error)"),
        (70, False, "exited with status 70"),
        (-signal.SIGKILL, False, "killed by SIGKILL (perhaps out of memory?)"),
        (-signal.SIGKILL, True, "killed by SIGKILL"),
        (-signal.SIGSEGV, False, "killed by SIGSEGV"),
    ],
)
def test_decode_exit(code: int, ours: bool, text: str) -> None:
    assert decode_exit(code, killed_by_us=ours) == text


def test_every_state_can_die_and_dead_is_final() -> None:
    assert all(
        SidecarState.DEAD in allowed
        for state, allowed in TRANSITIONS.items()
        if state is not SidecarState.DEAD
    )
    assert TRANSITIONS[SidecarState.DEAD] == frozenset()


async def wait(predicate: Callable[[], bool], timeout_s: float = 20) -> None:
    await wait_for(predicate, timeout_s, "the sidecar process")


def test_null_sidecar_frames_and_stderr_reach_the_parent(caplog: pytest.LogCaptureFixture) -> None:
    frames: list[dict] = []

    async def scenario() -> None:
        argv = [sys.executable, "-m", "sidecar", "--engine", "null", "--id", "cpu0"]
        proc = SidecarProcess(
            CPU,
            argv,
            dict(__import__("os").environ),
            1 << 20,
            lambda p, m: frames.append(m),
            lambda: None,
        )
        await proc.start()
        await wait(lambda: any(f["op"] == "ready" for f in frames))
        assert frames[0] == {"op": "hello", "pid": proc.pid, "protocol": PROTOCOL_VERSION}
        with pytest.raises(RuntimeError, match="no transition"):
            proc.change_state(SidecarState.BUSY)  # it never went READY in the parent's eyes
        proc.stop(KillReason.SHUTDOWN, 5)  # STARTING: stopped at once
        await wait(lambda: proc.state is SidecarState.DEAD)
        await proc.close()
        assert proc.kill_reason is KillReason.SHUTDOWN

    with caplog.at_level(logging.INFO, logger="omnivoice.sidecar"):
        asyncio.run(scenario())
    assert any(
        "[cpu0 pid" in r.getMessage() and "ready on cpu" in r.getMessage() for r in caplog.records
    )


def test_kill_takes_the_whole_process_group() -> None:
    """A child that started a grandchild (a compiler worker, say): SIGKILL reaches both."""
    script = "import subprocess, sys, time; subprocess.Popen(['sleep', '60']); time.sleep(60)"

    async def scenario() -> None:
        proc = SidecarProcess(
            CPU, [sys.executable, "-c", script], {}, 1 << 20, lambda p, m: None, lambda: None
        )
        await proc.start()
        await wait(lambda: len(psutil.Process(proc.pid).children()) == 1)
        grandchild = psutil.Process(proc.pid).children()[0]
        proc.kill(KillReason.HEARTBEAT_TIMEOUT, "test")
        await wait(lambda: proc.state is SidecarState.DEAD)
        await proc.close()
        assert proc.returncode == -signal.SIGKILL and proc.exit_description == "killed by SIGKILL"
        grandchild.wait(5)
        assert not grandchild.is_running()

    asyncio.run(scenario())


def test_garbage_on_stdout_is_a_protocol_error_and_a_kill() -> None:
    script = "import sys, time; sys.stdout.buffer.write(b'Loading weights...\\n'); sys.stdout.flush(); time.sleep(60)"

    async def scenario() -> None:
        proc = SidecarProcess(
            CPU, [sys.executable, "-c", script], {}, 1 << 20, lambda p, m: None, lambda: None
        )
        await proc.start()
        await wait(lambda: proc.state is SidecarState.DEAD)
        await proc.close()
        # b"Load" read as a length is 1282367844 bytes: over the cap, rejected before reading it
        assert proc.kill_reason is KillReason.PROTOCOL_ERROR and "cap" in proc.kill_detail

    asyncio.run(scenario())
