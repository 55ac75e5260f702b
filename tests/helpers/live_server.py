"""A real server for API tests: `python -m supervisor serve` in its own process, one per module.

Starting a server and its sidecar takes seconds, so API tests share one per test module (the
`live` context manager), each with its own data directory. On the way out the server gets
SIGTERM (and SIGKILL if it lingers), and no sidecar of it may be left. `faults=True` starts it
through tests/helpers/faulty_server.py, so that its sidecars honour fault markers; their tokens
must lie in the server's DATA_DIR/test-faults (OMNIVOICE_TEST_FAULT_DIR, made here).
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import signal
import struct
import subprocess
import sys
import time
import wave
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from sidecar.devtools.faults import DIR_ENV
from tests.helpers import faulty_server
from tests.helpers.harness import SPAWN_S, assert_gone
from tests.helpers.paths import REPO_ROOT
from tests.helpers.ports import free_port

KEY = "sk-test-key"
AUTH = {"Authorization": f"Bearer {KEY}"}


def tone_wav(seconds: float, amplitude: int = 8000, hz: float = 220.0, rate: int = 24000) -> bytes:
    """A mono 16-bit WAV of a sine tone: a reference clip the server can decode (amplitude 0: silence)."""
    count = int(seconds * rate)
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(
            struct.pack(
                f"<{count}h",
                *(int(amplitude * math.sin(2 * math.pi * hz * i / rate)) for i in range(count)),
            )
        )
    return out.getvalue()


class LiveServer:
    def __init__(self, proc: subprocess.Popen[bytes], url: str, log: Path) -> None:
        self.proc, self.url, self.log = proc, url, log

    def request(
        self, method: str, path: str, *, auth: bool = True, timeout: float = 120, **kw: Any
    ) -> httpx.Response:
        headers = {**(AUTH if auth else {}), **kw.pop("headers", {})}
        return httpx.request(method, self.url + path, headers=headers, timeout=timeout, **kw)

    def health(self) -> dict[str, Any]:
        body: dict[str, Any] = httpx.get(
            self.url + "/health", headers=AUTH, timeout=10
        ).json()  # with a key: pids too
        return body

    def wait_for(self, predicate: Any, timeout_s: float, what: str) -> dict[str, Any]:
        start = time.monotonic()
        while True:
            with contextlib.suppress(httpx.TransportError):
                body = self.health()
                if predicate(body):
                    return body
            if time.monotonic() - start > timeout_s or self.proc.poll() is not None:
                raise AssertionError(
                    f"timed out waiting for {what}; log:\n{self.log.read_text()[-3000:]}"
                )
            time.sleep(0.05)  # the poll of this wait, not a wait of its own


BIND_ATTEMPTS = 3  # a port taken between free_port() and the server's bind: another one


def start(log_dir: Path, argv: list[str]) -> tuple[LiveServer, list[int]]:
    """A ready server (its sidecars' pids) on a free port. The port is free when picked, not
    when the server binds it after its start-up; so a server that lost it to another process
    is started again on another port, and a server is ours only if it names our data dir."""
    data_dir = str(log_dir / "data")
    fault_dir = log_dir / "data" / "test-faults"
    fault_dir.mkdir(parents=True, exist_ok=True)
    environ = {**os.environ, "OMP_NUM_THREADS": "1", DIR_ENV: str(fault_dir)}
    for attempt in range(1, BIND_ATTEMPTS + 1):
        port = free_port()
        log = log_dir / f"server-{port}.log"
        with log.open("wb") as out:  # the child keeps its own copy of the log's descriptor
            proc = subprocess.Popen(
                [*argv, "--port", str(port), "--data-dir", data_dir],
                cwd=REPO_ROOT,
                env=environ,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        server = LiveServer(proc, f"http://127.0.0.1:{port}", log)
        try:
            body = server.wait_for(
                lambda b: b["status"] == "ok" and b["settings"]["data_dir"] == data_dir,
                SPAWN_S,
                "the server to be ready",
            )
        except AssertionError:
            said = log.read_text()  # serve's own check, or uvicorn's if the port went meanwhile
            in_use = "is in use on" in said or "address already in use" in said
            lost = proc.poll() is not None and in_use
            if not lost or attempt == BIND_ATTEMPTS:
                stop(proc)
                raise
            continue
        return server, [s["pid"] for s in body["sidecars"] if s["pid"]]
    raise AssertionError("unreachable")


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@contextlib.contextmanager
def live(
    log_dir: Path,
    *flags: str,
    checkpoint: Path | None = None,
    key: str | None = KEY,
    faults: bool = False,
) -> Iterator[LiveServer]:
    """A ready server on a free port; the tiny checkpoint if given, else the null engine; open to
    anyone with `key=None`; its sidecars honouring fault markers with `faults=True`."""
    model = ["--model", str(checkpoint)] if checkpoint else ["--engine", "null"]
    keys = ["--api-key", key] if key else []
    command = faulty_server.command() if faults else [sys.executable, "-m", "supervisor"]
    argv = [
        *command,
        "serve",
        *model,
        *keys,
        "--warmup-steps",
        "1",
        "--num-step",
        "4",
        "--stop-timeout-s",
        "5",
        *flags,
    ]
    server, pids = start(log_dir, argv)
    try:
        yield server
    finally:
        stop(server.proc)
        assert_gone(pids)
