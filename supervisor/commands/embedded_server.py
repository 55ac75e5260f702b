"""The server `synth --model` starts for its run: `serve` on a free local port, with a random key
kept in its data directory (jobs belong to the key that made them, so each run uses the same).

Its data directory is `DIR/.synth-server` (the job store, the key and the log, `server.log`), so
a run that is interrupted leaves its jobs there and the next run's server takes them up again.
The server gets SIGTERM when the run ends (it drains: the job items a sidecar has begun finish
and are written, the rest go back to the queue untouched, so nothing is made twice), and also
if the synth process dies without a chance to say so (the kernel sends it: PR_SET_PDEATHSIG).
OMNIVOICE_* variables apply to it as to any `serve`.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import TextIO

START_S = 900.0  # loading a large checkpoint from a cold disk can take minutes
STOP_S = 90.0
PR_SET_PDEATHSIG = 1
USAGE = 2  # serve's exit status for settings that cannot work


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def die_with_parent() -> None:
    """In the child before exec: SIGTERM when the parent dies (Linux; elsewhere nothing)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def last_line(path: Path) -> str:
    """The log's last line (its end only: a long log is not read whole)."""
    try:
        with open(path, "rb") as log:
            log.seek(max(0, log.seek(0, os.SEEK_END) - 4096))
            lines = log.read().decode(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1].strip() if lines else ""


class ServerFailed(RuntimeError):
    """The server did not become ready."""


class ServerRefused(ServerFailed):
    """It exited with status 2: its settings cannot work (a --model, a port); a rerun will not help."""


class EmbeddedServer:
    def __init__(self, model: str, data_dir: Path, log: TextIO) -> None:
        self.model = model
        self.data_dir = data_dir
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> tuple[str, str]:
        """Start it and wait until it is ready; (its URL, its API key)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        port, key = free_port(), self.key()
        log_path = self.data_dir / "server.log"
        argv = [
            sys.executable,
            "-m",
            "supervisor",
            "serve",
            "--model",
            self.model,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--data-dir",
            str(self.data_dir),
        ]
        # The key goes through the environment: argv is visible to every local user in `ps`.
        environ = {**os.environ, "OMNIVOICE_API_KEYS": key}
        print(f"synth: starting a server for this run (log: {log_path})", file=self.log, flush=True)
        with open(log_path, "ab") as server_log:
            # Its own session: a Ctrl-C at the terminal reaches synth alone, which then stops the server once.
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=server_log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=die_with_parent,
                env=environ,
            )
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + START_S
        while not self.ready(url):
            if self.proc.poll() is not None:
                said = last_line(log_path)  # a --model or port refused: serve's one line
                failed = ServerRefused if self.proc.returncode == USAGE else ServerFailed
                raise failed(
                    f"the server exited with status {self.proc.returncode} before it was ready"
                    + (f": {said}" if said else "")
                    + f"; see {log_path}"
                )
            if time.monotonic() > deadline:
                raise ServerFailed(f"the server was not ready after {START_S:g} s; see {log_path}")
            time.sleep(0.2)
        print(f"synth: server ready at {url}", file=self.log, flush=True)
        return url, key

    def key(self) -> str:
        """The run's API key: made once per data directory (DIR/.synth-server/api-key, 0600) and
        kept, since jobs belong to the key that made them: the next run must see this one's."""
        path = self.data_dir / "api-key"
        try:
            return path.read_text().strip()
        except FileNotFoundError:
            pass
        key = "sk-synth-" + secrets.token_hex(16)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as out:
            out.write(key + "\n")
        return key

    @staticmethod
    def ready(url: str) -> bool:
        try:
            with urllib.request.urlopen(url + "/ready", timeout=5) as response:
                return bool(json.loads(response.read()).get("ready"))
        except (urllib.error.URLError, OSError, ValueError):
            return False

    def stop(self) -> None:
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(STOP_S)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
