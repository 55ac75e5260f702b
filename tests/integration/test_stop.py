"""`omnivoice-supervisor stop` and `serve --pid-file` against real servers (null-engine sidecars)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers import faulty_server
from tests.helpers.paths import REPO_ROOT
from tests.helpers.ports import free_port
from tests.helpers.waits import wait_until

START_S = 30.0


def command(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "supervisor", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def wait_busy(port: int) -> None:
    """Until the server's sidecar is generating (the request in flight has reached it)."""
    wait_until(
        lambda: (
            httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).json()["sidecars"][0]["state"]
            == "busy"
        ),
        60,
        "the request to reach the sidecar",
    )


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Any]:
    started: list[subprocess.Popen[bytes]] = []

    def start(*flags: str, wait_ready: bool = True) -> tuple[subprocess.Popen[bytes], int]:
        port = free_port()
        argv = [
            *faulty_server.command("serve"),
            "--engine",
            "null",
            "--devices",
            "cpu",
            "--port",
            str(port),
            "--stop-timeout-s",
            "5",
            "--data-dir",
            str(tmp_path / f"data-{port}"),
            *flags,
        ]
        with (tmp_path / f"server-{port}.log").open(
            "wb"
        ) as log:  # the child keeps its own copy of the log's descriptor
            proc = subprocess.Popen(
                argv,
                cwd=REPO_ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "OMP_NUM_THREADS": "1"},
            )
        started.append(proc)
        deadline = time.monotonic() + START_S
        while wait_ready:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/ready", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, (
                tmp_path / f"server-{port}.log"
            ).read_text()
            time.sleep(0.05)  # the poll of this wait, not a wait of its own
        return proc, port

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_stop_by_pid_file_drains_and_removes_the_file(serve: Any, tmp_path: Path) -> None:
    pid_file = tmp_path / "server.pid"
    proc, _ = serve("--pid-file", str(pid_file))
    assert pid_file.read_text() == f"{proc.pid}\n"
    assert not list(tmp_path.glob("*.tmp")), (
        "the pid file is written through a renamed temporary file"
    )

    # A second server with the same pid file refuses to start, and leaves the file alone.
    second, _ = serve("--pid-file", str(pid_file), wait_ready=False)
    assert second.wait(30) == 2
    assert pid_file.read_text() == f"{proc.pid}\n"

    done = command("stop", "--pid-file", str(pid_file))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"pid {proc.pid} exited after" in done.stdout
    assert proc.wait(5) == 0
    assert not pid_file.exists()


def test_stop_by_port_waits_for_work_in_flight(serve: Any) -> None:
    proc, port = serve()
    reply: dict[str, httpx.Response] = {}
    body = {"input": "Slow but sure. [[fault:slow:2]]"}
    thread = threading.Thread(
        target=lambda: reply.setdefault(
            "r", httpx.post(f"http://127.0.0.1:{port}/v1/audio/speech", json=body, timeout=60)
        )
    )
    thread.start()
    wait_busy(port)
    done = command("stop", "--port", str(port))
    assert done.returncode == 0, done.stdout + done.stderr
    thread.join(30)
    assert reply["r"].status_code == 200, "stop must let the request in flight finish"
    assert proc.wait(5) == 0


def test_stop_past_its_timeout_sends_a_second_sigterm(serve: Any) -> None:
    proc, port = serve()
    thread = threading.Thread(
        target=lambda: httpx.post(
            f"http://127.0.0.1:{port}/v1/audio/speech",
            json={"input": "Never ends. [[fault:slow:60]]"},
            timeout=60,
        )
    )
    thread.start()
    wait_busy(port)
    done = command("stop", "--port", str(port), "--timeout-s", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "second SIGTERM" in done.stdout and "cut short" in done.stdout
    assert proc.wait(5) == 0
    thread.join(10)


def test_stop_never_signals_what_is_not_a_server(tmp_path: Path) -> None:
    missing = command("stop", "--pid-file", str(tmp_path / "absent.pid"))
    assert missing.returncode == 1 and "no server" in missing.stdout

    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        stale = tmp_path / "stale.pid"
        stale.write_text(f"{bystander.pid}\n")
        refused = command("stop", "--pid-file", str(stale))
        assert (
            refused.returncode == 1
            and "not a running omnivoice-supervisor server" in refused.stdout
        )
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen()
            port = listener.getsockname()[1]
            held = command("stop", "--port", str(port))
            assert held.returncode == 1 and "not an omnivoice-supervisor server" in held.stdout, (
                held.stdout
            )
        assert bystander.poll() is None
    finally:
        bystander.send_signal(signal.SIGKILL)
        bystander.wait()

    nobody = command("stop", "--port", str(free_port()))
    assert nobody.returncode == 1 and "nothing we can see listens" in nobody.stdout
