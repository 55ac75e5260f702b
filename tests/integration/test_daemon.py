"""The server under a stand-in for systemd: a real datagram socket as $NOTIFY_SOCKET.

The test plays the service manager's part: it binds the socket, starts `serve` with
NOTIFY_SOCKET and WATCHDOG_USEC, and reads what arrives: READY=1 once the sidecar is ready,
WATCHDOG=1 every half interval (and none while the event loop is wedged), STOPPING=1 when
SIGTERM starts the drain. The stop paths (drain deadline, second SIGTERM) are checked here too.
"""

from __future__ import annotations

import itertools
import os
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers import faulty_server
from tests.helpers.harness import SPAWN_S, assert_gone
from tests.helpers.paths import REPO_ROOT
from tests.helpers.ports import free_port
from tests.helpers.waits import wait_until

WATCHDOG_S = 1.0  # systemd would ping-check every 1 s; the server pings every 0.5 s


class Manager:
    """The service manager's end of $NOTIFY_SOCKET: every datagram, with its arrival time."""

    def __init__(self) -> None:
        self.address = f"@omnivoice-test-{uuid.uuid4().hex}"  # abstract namespace, as systemd uses
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind("\0" + self.address[1:])
        self.sock.settimeout(0.1)
        self.messages: list[tuple[float, dict[str, str]]] = []
        self._closed = False
        self._thread = threading.Thread(target=self._receive, daemon=True)
        self._thread.start()

    def _receive(self) -> None:
        while not self._closed:
            try:
                data = self.sock.recv(4096)
            except (TimeoutError, OSError):
                continue
            fields = dict(line.split("=", 1) for line in data.decode().splitlines())
            self.messages.append((time.monotonic(), fields))

    def close(self) -> None:
        self._closed = True
        self._thread.join(2)
        self.sock.close()

    def wait_for(
        self, key: str, timeout_s: float, proc: subprocess.Popen[bytes] | None = None
    ) -> float:
        """Arrival time of the first message carrying `key`."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for at, fields in list(self.messages):
                if key in fields:
                    return at
            if proc is not None and proc.poll() is not None:
                break
            time.sleep(0.02)  # the poll of this wait, not a wait of its own
        raise AssertionError(
            f"no {key} within {timeout_s:.0f} s; got {[f for _, f in self.messages]}"
        )

    def until(self, condition: Callable[[], bool], what: str, timeout_s: float = 60.0) -> None:
        """Poll until condition() holds; fail naming `what` after a generous timeout_s."""
        wait_until(condition, timeout_s, f"{what} (got {self.messages})")

    def pings(self, start: float, end: float) -> list[float]:
        return [
            at for at, fields in list(self.messages) if "WATCHDOG" in fields and start <= at <= end
        ]


class Server:
    def __init__(self, proc: subprocess.Popen[bytes], url: str, log: Path) -> None:
        self.proc, self.url, self.log = proc, url, log

    def health(self) -> dict[str, Any]:
        return httpx.get(self.url + "/health", timeout=10).json()

    def speak(self, text: str) -> httpx.Response:
        return httpx.post(self.url + "/v1/audio/speech", json={"input": text}, timeout=120)

    def wait_busy(self) -> None:
        wait_until(
            lambda: self.health()["sidecars"][0]["state"] == "busy", 30, "the request to start"
        )

    def tail(self) -> str:
        return self.log.read_text()[-3000:]


@pytest.fixture
def manager() -> Iterator[Manager]:
    m = Manager()
    yield m
    m.close()


@pytest.fixture
def start_server(checkpoint_dir: Path, tmp_path: Path, manager: Manager) -> Iterator[Any]:
    started: list[Server] = []

    def start(*flags: str) -> Server:
        port = free_port()
        log = tmp_path / f"server-{port}.log"
        argv = [
            *faulty_server.command("serve"),
            "--model",
            str(checkpoint_dir),
            "--port",
            str(port),
            "--devices",
            "cpu",
            "--warmup-steps",
            "1",
            "--num-step",
            "4",
            "--heartbeat-timeout-s",
            "10",
            "--stop-timeout-s",
            "5",
            "--data-dir",
            str(tmp_path / f"data-{port}"),
            *flags,
        ]
        env = {
            **os.environ,
            "OMP_NUM_THREADS": "1",
            "NOTIFY_SOCKET": manager.address,
            "WATCHDOG_USEC": str(int(WATCHDOG_S * 1e6)),
        }
        with log.open("wb") as out:  # the child keeps its own copy of the log's descriptor
            proc = subprocess.Popen(
                argv, cwd=REPO_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
            )
        server = Server(proc, f"http://127.0.0.1:{port}", log)
        started.append(server)
        return server

    yield start
    for server in started:
        if server.proc.poll() is None:
            server.proc.send_signal(signal.SIGKILL)
            server.proc.wait(10)


def in_background(server: Server, text: str) -> tuple[threading.Thread, dict[str, httpx.Response]]:
    outcome: dict[str, httpx.Response] = {}
    thread = threading.Thread(target=lambda: outcome.setdefault("reply", server.speak(text)))
    thread.start()
    return thread, outcome


def test_ready_watchdog_wedged_loop_and_stopping(start_server: Any, manager: Manager) -> None:
    server = start_server()
    ready_at = manager.wait_for("READY", SPAWN_S, server.proc)
    body = server.health()
    assert body["sidecars"][0]["state"] == "ready", body
    before = [fields for at, fields in manager.messages if at < ready_at]
    assert any(f.get("STATUS", "").startswith("0/1 sidecars ready") for f in before), before
    assert any("EXTEND_TIMEOUT_USEC" in f for f in before), (
        before
    )  # the start timeout grows while loading
    ready = next(fields for at, fields in manager.messages if at == ready_at)
    assert ready["STATUS"].startswith("1/1 sidecars ready, queue 0"), ready
    sidecar_env = Path(f"/proc/{body['sidecars'][0]['pid']}/environ").read_bytes()
    assert b"NOTIFY_SOCKET" not in sidecar_env and b"WATCHDOG_USEC" not in sidecar_env

    # Pings every half interval from the event loop (the cadence itself is checked on a fake
    # clock in tests/supervisor/commands/test_sd_notify.py; here, that this server runs it) ...
    assert "pinging every 0.5 s from the event loop" in server.log.read_text()
    manager.until(lambda: len(manager.pings(ready_at, time.monotonic())) >= 3, "three pings")

    # ... and none while it is wedged (SIGUSR2 under tests/helpers/faulty_server.py: 3 s of
    # time.sleep in the loop):
    # a gap of over 2.5 s, after which the pings resume.
    wedged_at = time.monotonic()
    server.proc.send_signal(signal.SIGUSR2)

    def wedge_seen() -> bool:
        gaps = itertools.pairwise(manager.pings(wedged_at - WATCHDOG_S, time.monotonic()))
        return any(b - a > 2.5 for a, b in gaps)

    manager.until(wedge_seen, "a gap in the pings while the loop was blocked, then a ping")

    # SIGTERM with a request in flight: STOPPING=1, 503 for newcomers, the request finishes, exit 0.
    pids = [s["pid"] for s in server.health()["sidecars"]]
    thread, outcome = in_background(server, "Still going. [[fault:slow:3]]")
    server.wait_busy()
    server.proc.send_signal(signal.SIGTERM)
    stopping_at = manager.wait_for("STOPPING", 10, server.proc)
    refused = server.speak("Too late.")
    assert refused.status_code == 503 and int(refused.headers["Retry-After"]) >= 1
    thread.join(60)
    assert outcome["reply"].status_code == 200, outcome["reply"].text
    assert server.proc.wait(30) == 0, server.tail()
    assert_gone(pids)
    after = [fields for at, fields in manager.messages if at >= stopping_at]
    assert after[0]["STATUS"].startswith("draining"), after[0]
    assert not any("READY" in f for f in after)
    assert manager.pings(stopping_at, time.monotonic()), "the watchdog was not fed while draining"


def test_drain_deadline_then_second_sigterm(start_server: Any, manager: Manager) -> None:
    """A request that outlasts --drain-s is answered with an error when the deadline passes, and the
    process exits 0; a second SIGTERM cuts the drain short the same way."""
    for flags, second_signal in ((("--drain-s", "1"), False), (("--drain-s", "60"), True)):
        server = start_server(*flags)
        manager.wait_for("READY", SPAWN_S, server.proc)
        manager.messages.clear()
        pids = [s["pid"] for s in server.health()["sidecars"]]
        thread, outcome = in_background(server, "Far too slow. [[fault:slow:60]]")
        server.wait_busy()
        server.proc.send_signal(signal.SIGTERM)
        manager.wait_for("STOPPING", 10, server.proc)
        if second_signal:
            server.proc.send_signal(signal.SIGTERM)
        # The request alone takes 60 s: an exit well within that (a generous 30 s on a loaded
        # machine) is the stop cut short, and the reply below says how.
        assert server.proc.wait(30) == 0, server.tail()
        thread.join(10)
        reply = outcome["reply"]
        assert reply.status_code == 500 and reply.json()["error"]["code"] == "sidecar_lost", (
            reply.text
        )
        assert_gone(pids)
        assert "the drain is over" in server.tail() or "told to stop at once" in server.tail()
