"""supervisor/systemd.py: the sd_notify wire format on real datagram sockets, and the reporting loop."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from supervisor.systemd import Notifier, ServiceState


@pytest.fixture
def receiver() -> Iterator[tuple[str, socket.socket]]:
    """A datagram socket bound to a filesystem path (short: sun_path holds 108 bytes)."""
    with tempfile.TemporaryDirectory(dir="/tmp") as directory:
        path = os.path.join(directory, "notify")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(path)
        sock.settimeout(2)
        yield path, sock
        sock.close()


def received(sock: socket.socket) -> list[str]:
    sock.settimeout(0.05)
    out = []
    with pytest.raises(socket.timeout):
        while True:
            out.append(sock.recv(4096).decode())
    return out


def test_from_environ_takes_the_variables_away_from_children() -> None:
    environ = {
        "NOTIFY_SOCKET": "@x",
        "WATCHDOG_USEC": "4000000",
        "WATCHDOG_PID": str(os.getpid()),
        "PATH": "/bin",
    }
    notifier = Notifier.from_environ(environ)
    assert (notifier.address, notifier.watchdog_s, environ) == ("@x", 4.0, {"PATH": "/bin"})
    assert (
        Notifier.from_environ(
            {"NOTIFY_SOCKET": "@x", "WATCHDOG_USEC": "4000000", "WATCHDOG_PID": "1"}
        ).watchdog_s
        is None
    )
    assert (
        Notifier.from_environ({"NOTIFY_SOCKET": "@x", "WATCHDOG_USEC": "soon"}).watchdog_s is None
    )
    quiet = Notifier.from_environ({})
    assert not quiet.enabled and quiet.send(READY=1) is False


def test_one_datagram_of_key_value_lines_to_a_path(receiver: tuple[str, socket.socket]) -> None:
    path, sock = receiver
    notifier = Notifier(path)
    assert notifier.send(READY=1, STATUS="1/1 sidecars ready, queue 0")
    assert sock.recv(4096) == b"READY=1\nSTATUS=1/1 sidecars ready, queue 0"
    notifier.stopping("draining")
    notifier.stopping("draining again")  # said once
    assert received(sock) == ["STOPPING=1\nSTATUS=draining"]


def test_abstract_namespace_address() -> None:
    name = f"omnivoice-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        sock.settimeout(2)
        assert Notifier("@" + name).send(WATCHDOG=1)
        assert sock.recv(4096) == b"WATCHDOG=1"


def test_a_vanished_socket_is_logged_once_and_never_raises(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    notifier = Notifier(str(tmp_path / "gone"))
    with caplog.at_level(logging.WARNING, "omnivoice.systemd"):
        assert notifier.send(WATCHDOG=1) is False
        assert notifier.send(WATCHDOG=1) is False
    assert len([r for r in caplog.records if "cannot notify systemd" in r.message]) == 1


def test_run_says_ready_once_pings_only_while_alive_and_never_ready_after_stopping(
    receiver: tuple[str, socket.socket],
) -> None:
    path, sock = receiver
    state = ServiceState(
        ready=False, loading=True, alive=True, status="0/1 sidecars ready, queue 0"
    )

    async def scenario() -> dict[str, list[str]]:
        nonlocal state
        notifier = Notifier(path, watchdog_usec=100_000)  # a ping every 50 ms
        task = asyncio.create_task(notifier.run(lambda: state))
        seen: dict[str, list[str]] = {}
        await asyncio.sleep(0.3)
        seen["loading"] = received(sock)
        state = state._replace(ready=True, loading=False, status="1/1 sidecars ready, queue 0")
        await asyncio.sleep(0.3)
        seen["ready"] = received(sock)
        state = state._replace(alive=False)
        await asyncio.sleep(0.3)
        seen["dead"] = received(sock)
        notifier.stopping("draining")
        notifier.is_ready = False  # even if READY had never gone out, it must not follow STOPPING
        state = state._replace(alive=True)
        await asyncio.sleep(0.2)
        seen["stopping"] = received(sock)
        task.cancel()
        return seen

    seen = asyncio.run(scenario())
    assert seen["loading"][0] == "STATUS=0/1 sidecars ready, queue 0"
    assert (
        "EXTEND_TIMEOUT_USEC=30000000" in seen["loading"]
        and seen["loading"].count("WATCHDOG=1") >= 3
    )
    assert seen["ready"][0] == "READY=1\nSTATUS=1/1 sidecars ready, queue 0"
    assert seen["ready"].count("WATCHDOG=1") >= 3 and not any("EXTEND" in m for m in seen["ready"])
    assert seen["dead"] == [] or seen["dead"] == ["WATCHDOG=1"]  # at most one already due
    assert seen["stopping"][0] == "STOPPING=1\nSTATUS=draining"
    assert "WATCHDOG=1" in seen["stopping"] and not any("READY" in m for m in seen["stopping"])
