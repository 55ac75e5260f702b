"""`serve` on a port another process holds: one line and status 2 before anything starts.

Issue 37.5: uvicorn's raw `[Errno 98]` came among info lines after a sidecar had started, and
the exit status was 3. A real socket holds the port; the real command line runs.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

from supervisor.commands.port_check import port_problem


def test_a_port_in_use_is_one_line_and_status_2_before_a_sidecar_starts(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "supervisor",
                "serve",
                "--engine",
                "null",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--data-dir",
                str(tmp_path),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f"omnivoice-supervisor serve: port {port} is in use on 127.0.0.1 (another server?): "
        f"stop it (omnivoice-supervisor stop --port {port}) or give another --port"
    ]
    assert not (tmp_path / "jobs.sqlite3").exists()  # nothing started: no store opened


def test_a_free_port_and_an_address_not_of_this_machine() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert port_problem("127.0.0.1", port) is None
    assert port_problem("127.0.0.1", 0) is None
    problem = port_problem("192.0.2.1", port)  # TEST-NET-1: never this machine's
    assert problem is not None and "not an address of this machine" in problem
