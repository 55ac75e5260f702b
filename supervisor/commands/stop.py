"""`omnivoice-supervisor stop`: find a server run outside systemd, SIGTERM it, wait, report.

The server is found by its pid file, by the port it listens on, or both (two servers, or the
same one found twice). Either way the process must look like `omnivoice-supervisor serve` (or
`start`) before it is signalled, so a stale pid file or a port now held by something else is
never acted on. The first SIGTERM starts the server's drain; if it has not exited by
--timeout-s, a second SIGTERM ends the drain at once. Under systemd, `stop --systemd` runs
`systemctl stop` instead, so the unit knows it was stopped.
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import time
from collections.abc import Callable

import psutil

from supervisor.commands import pidfile

EXIT_STOPPED = 0
EXIT_NOT_RUNNING = 1
EXIT_STILL_RUNNING = 3
DEFAULT_PORT = 9194
DEFAULT_TIMEOUT_S = 90.0  # the drain (60 s by default) plus the sidecars' stop, with room to spare
FORCED_WAIT_S = 15.0  # after the second SIGTERM: sidecars are SIGKILLed, answers go out, exit


class ServerNotFound(LookupError):
    """No server where we were told to look; the message says what was there instead."""


def find_by_pid_file(path: str) -> int:
    pid = pidfile.read(path)
    if pid is None:
        raise ServerNotFound(f"{path} does not exist or holds no pid")
    if not pidfile.is_server(pid):
        raise ServerNotFound(
            f"{path} names pid {pid}, which is not a running omnivoice-supervisor server (a stale file?)"
        )
    return pid


def find_by_port(port: int) -> int:
    """The server process listening on the TCP port (processes we may not inspect stay hidden)."""
    listeners = {
        c.pid
        for c in psutil.net_connections(kind="tcp")
        if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port and c.pid
    }
    if not listeners:
        raise ServerNotFound(f"nothing we can see listens on port {port}")
    servers = sorted(pid for pid in listeners if pidfile.is_server(pid))
    if not servers:
        names = ", ".join(f"pid {pid} ({_name(pid)})" for pid in sorted(listeners))
        raise ServerNotFound(f"port {port} is held by {names}, not an omnivoice-supervisor server")
    return int(servers[0])


def _name(pid: int) -> str:
    try:
        return str(psutil.Process(pid).name())
    except psutil.Error:
        return "gone"


def wait_gone(pid: int, timeout_s: float) -> bool:
    """True once pid has exited (a zombie its parent has not reaped yet counts as gone)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def stop(pid_file: str | None, port: int | None, timeout_s: float = DEFAULT_TIMEOUT_S) -> int:
    """Stop the server(s) the pid file and the port name; print what happened; return the exit status."""
    pids: list[int] = []
    missing: list[str] = []
    searches: list[Callable[[], int]] = []
    if pid_file:
        searches.append(functools.partial(find_by_pid_file, pid_file))
    if port:
        searches.append(functools.partial(find_by_port, port))
    for find in searches:
        try:
            pid = find()
        except ServerNotFound as exc:
            missing.append(str(exc))
            continue
        if pid not in pids:
            pids.append(pid)
    if not pids:
        print(
            f"omnivoice-supervisor stop: no server: {'; '.join(missing) or 'no pid file given, and --no-port'}"
        )
        return EXIT_NOT_RUNNING
    for reason in missing:
        print(f"(also looked: {reason})")
    statuses = [stop_pid(pid, timeout_s) for pid in pids]
    return max(statuses)


def stop_systemd(service: str) -> int:
    """`systemctl stop` the unit (it drains the same way); its exit status is ours."""
    unit = service if service.endswith(".service") else f"{service}.service"
    print(f"systemctl stop {unit}", flush=True)
    try:
        return subprocess.run(["systemctl", "stop", unit], check=False).returncode
    except FileNotFoundError:
        print("omnivoice-supervisor stop: systemctl is not installed here")
        return EXIT_NOT_RUNNING


def stop_pid(pid: int, timeout_s: float) -> int:
    """SIGTERM one server, wait for its drain, a second SIGTERM past timeout_s; the exit status."""
    started = time.monotonic()
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        print(f"pid {pid} exited before it could be signalled")
        return EXIT_STOPPED
    print(f"sent SIGTERM to pid {pid}; waiting up to {timeout_s:g} s for it to drain and exit")
    if wait_gone(pid, timeout_s):
        print(f"pid {pid} exited after {time.monotonic() - started:.1f} s")
        return EXIT_STOPPED
    os.kill(pid, signal.SIGTERM)
    print(
        f"pid {pid} still running after {timeout_s:g} s; sent a second SIGTERM (work still in flight fails)"
    )
    if wait_gone(pid, FORCED_WAIT_S):
        print(f"pid {pid} exited after {time.monotonic() - started:.1f} s, cut short")
        return EXIT_STOPPED
    print(
        f"pid {pid} is still running {time.monotonic() - started:.0f} s after the first SIGTERM; "
        f"kill it with `kill -KILL {pid}` (its sidecars exit on their own within a second)"
    )
    return EXIT_STILL_RUNNING
