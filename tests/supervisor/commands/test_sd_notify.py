"""supervisor/commands/sd_notify.py: the sd_notify wire format on real datagram sockets, and the reporting loop."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import socket
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from supervisor.commands.sd_notify import Notifier, ServiceState
from tests.helpers.harness import wait_for

STALL_S = 30.0  # a phase that waits longer than this has failed (the machine is shared)


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

    passes = 0  # the notifier samples the state once per pass of its loop

    def sample() -> ServiceState:
        nonlocal passes
        passes += 1
        return state

    async def scenario() -> dict[str, list[str]]:
        nonlocal state
        loop = asyncio.get_running_loop()
        sock.setblocking(False)  # the notifier runs in this loop: nothing arrives while we read

        def waiting() -> list[str]:
            out = []
            with contextlib.suppress(BlockingIOError):
                while True:
                    out.append(sock.recv(4096).decode())
            return out

        async def until(done: Callable[[list[str]], bool], what: str) -> list[str]:
            """What arrives until `done` holds for it; the condition, not a sleep, ends a phase."""
            got, deadline, start = [], loop.time() + STALL_S, passes
            while True:
                got += waiting()
                if done(got) and passes >= start + 2:  # two passes at least: a wrong READY shows
                    return got
                assert loop.time() < deadline, f"no {what} within {STALL_S:g} s: {got}"
                await asyncio.sleep(0.01)  # the poll of this wait, which also counts passes

        def pings(n: int) -> Callable[[list[str]], bool]:
            return lambda got: got.count("WATCHDOG=1") >= n

        notifier = Notifier(path, watchdog_usec=100_000)  # a ping every 50 ms, a pass every 25
        task = asyncio.create_task(notifier.run(sample))
        seen = {"loading": await until(pings(3), "three pings while loading")}
        state = state._replace(ready=True, loading=False, status="1/1 sidecars ready, queue 0")
        seen["ready"] = await until(pings(3), "READY and three pings")
        state, dead_from = state._replace(alive=False), passes
        # a dozen passes take 11 sleeps of 25 ms: over five watchdog intervals with no ping
        seen["dead"] = await until(lambda _: passes >= dead_from + 12, "a dozen passes")
        notifier.stopping("draining")
        notifier.is_ready = False  # even if READY had never gone out, it must not follow STOPPING
        state = state._replace(alive=True)
        seen["stopping"] = await until(pings(1), "STOPPING and a ping")
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


def test_the_watchdog_is_fed_every_half_interval_of_its_clock(
    receiver: tuple[str, socket.socket],
) -> None:
    """The cadence on a fake clock that moves 1/64 s per pass of the loop: with WatchdogSec at
    1/8 s, WATCHDOG=1 goes out every fourth pass (1/16 s), never later, whatever the real time."""
    path, sock = receiver
    sock.setblocking(False)
    step, fake = 1 / 64, [1000.0]
    pings: list[float] = []  # the notifier's clock when each WATCHDOG=1 was sent
    sent_at = fake[0]

    def sample() -> ServiceState:
        nonlocal sent_at
        with contextlib.suppress(BlockingIOError):  # what the previous pass sent
            while True:
                if sock.recv(4096) == b"WATCHDOG=1":
                    pings.append(sent_at)
        sent_at = fake[0]  # this pass read the clock just before sampling the state
        fake[0] += step
        return ServiceState(ready=True, loading=False, alive=True, status="1/1")

    async def scenario() -> None:
        notifier = Notifier(path, watchdog_usec=125_000, clock=lambda: fake[0])
        task = asyncio.create_task(notifier.run(sample))
        await wait_for(lambda: len(pings) >= 6, STALL_S, "six pings")
        task.cancel()

    asyncio.run(scenario())
    assert pings[0] == 1000.0  # the first pass feeds it at once
    assert [b - a for a, b in itertools.pairwise(pings)] == [1 / 16] * (len(pings) - 1), pings
