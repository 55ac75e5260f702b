"""The real server: `python -m supervisor serve` in its own process, spoken to over HTTP."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import threading
import wave
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from sidecar.devtools.faults import LOAD_ENV
from tests.helpers import faulty_server
from tests.helpers.harness import SPAWN_S, assert_gone
from tests.helpers.job_helpers import wait_gone
from tests.helpers.live_server import AUTH, KEY, REPO_ROOT, LiveServer, free_port


class Server(LiveServer):
    def get(self, path: str, **kw: Any) -> httpx.Response:
        return httpx.get(self.url + path, timeout=30, **kw)

    def speak(self, text: str, timeout: float = 120, **body: Any) -> httpx.Response:
        return httpx.post(
            self.url + "/v1/audio/speech",
            json={"input": text, **body},
            headers=AUTH,
            timeout=timeout,
        )

    def sidecar_pids(self) -> list[int]:
        return [
            s["pid"] for s in self.get("/health", headers=AUTH).json()["sidecars"] if s["pid"]
        ]  # pids need the key


@pytest.fixture
def start_server(checkpoint_dir: Path, tmp_path: Path) -> Iterator[Any]:
    started: list[Server] = []

    def start(
        *flags: str,
        env: dict[str, str] | None = None,
        wait_ready: bool = True,
        cwd: Path = REPO_ROOT,
        command: tuple[str, ...] = tuple(faulty_server.command()),
    ) -> Server:
        port = free_port()
        log = tmp_path / f"server-{port}.log"
        argv = [
            *command,
            "serve",
            "--model",
            str(checkpoint_dir),
            "--port",
            str(port),
            "--api-key",
            KEY,
            "--warmup-steps",
            "1",
            "--num-step",
            "4",
            "--heartbeat-timeout-s",
            "5",
            "--backoff-initial-s",
            "0.1",
            "--stop-timeout-s",
            "5",
            "--data-dir",
            str(tmp_path / f"data-{port}"),
            *flags,
        ]
        environ = {**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}
        with log.open("wb") as out:  # the child keeps its own copy of the log's descriptor
            proc = subprocess.Popen(
                argv, cwd=cwd, env=environ, stdout=out, stderr=subprocess.STDOUT
            )
        server = Server(proc, f"http://127.0.0.1:{port}", log)
        started.append(server)
        if wait_ready:
            server.wait_for(lambda b: b["status"] == "ok", SPAWN_S, "the server to be ready")
        return server

    yield start
    for server in started:
        if server.proc.poll() is None:
            server.proc.send_signal(signal.SIGKILL)
            server.proc.wait(10)


def test_speech_health_ready_auth_and_admission(start_server: Any) -> None:
    server = start_server("--max-queue-audio-s", "10")
    health = server.get("/health").json()
    [sidecar] = health["sidecars"]
    assert (health["status"], sidecar["id"], sidecar["device"], sidecar["state"]) == (
        "ok",
        "cpu0",
        "cpu",
        "ready",
    )
    assert server.get("/ready").status_code == 200

    assert httpx.post(server.url + "/v1/audio/speech", json={"input": "Hi."}).status_code == 401
    reply = server.speak("Hello from the supervisor.", response_format="wav")
    assert reply.status_code == 200 and reply.headers["content-type"] == "audio/wav"
    with wave.open(io.BytesIO(reply.content)) as wav:
        assert (wav.getframerate(), wav.getsampwidth(), wav.getnchannels()) == (
            24000,
            2,
            1,
        ) and wav.getnframes() > 2400

    bad = server.speak("Hi.", model="whisper-1")
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "model"

    # A request of more audio (~17 s) than the whole queue admits (10 s) is refused as such.
    whole = server.speak("Slow and steady wins the race, " * 9)
    assert whole.status_code == 400 and whole.json()["error"]["code"] == "audio_too_long"
    # Two slow requests (~6.6 s of audio each) fill the 10 s queue; even a short one behind them
    # is refused with Retry-After. (A queue below its limit admits any request it could hold.)
    slow = [
        threading.Thread(
            target=lambda: server.speak("Slow and steady wins the race, " * 3 + "[[fault:slow:3]]")
        )
        for _ in range(2)
    ]
    slow[0].start()
    server.wait_for(lambda b: b["queue"]["tasks"] == 1, 10, "the first slow request")
    slow[1].start()
    server.wait_for(lambda b: b["queue"]["tasks"] == 2, 10, "the second slow request")
    refused = server.speak("Hi.")
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
    assert refused.json()["error"]["type"] == "rate_limit_error"
    for thread in slow:
        thread.join(60)


def test_sigterm_finishes_work_in_flight_then_exits_cleanly(start_server: Any) -> None:
    server = start_server()
    pids = server.sidecar_pids()
    outcome: dict[str, httpx.Response] = {}
    in_flight = threading.Thread(
        target=lambda: outcome.setdefault("r", server.speak("Still going. [[fault:slow:3]]"))
    )
    in_flight.start()
    server.wait_for(lambda b: b["sidecars"][0]["state"] == "busy", 30, "the request to be running")
    server.proc.send_signal(signal.SIGTERM)

    server.wait_for(lambda b: b["status"] == "draining", 10, "draining")
    refused = server.speak("Too late.")
    assert refused.status_code == 503 and "Retry-After" in refused.headers
    assert server.get("/ready").status_code == 503

    in_flight.join(60)
    assert outcome["r"].status_code == 200
    assert server.proc.wait(30) == 0
    assert_gone(pids)
    assert "shutdown requested" in server.log.read_text()


def test_sidecars_exit_when_the_supervisor_is_killed(start_server: Any) -> None:
    server = start_server()
    pids = server.sidecar_pids()
    server.proc.send_signal(signal.SIGKILL)
    server.proc.wait(10)
    wait_gone(pids)


def test_every_device_failed_means_failed_health_and_a_nonzero_exit(start_server: Any) -> None:
    server = start_server(
        "--max-restarts", "1", "--failed-exit-s", "1", env={LOAD_ENV: "crash"}, wait_ready=False
    )
    body = server.wait_for(lambda b: b["status"] == "failed", 30, "every device to fail")
    assert (
        body["sidecars"][0]["state"] == "failed"
        and "restart intensity" in body["sidecars"][0]["last_error"]
    )
    assert server.get("/ready").status_code == 503
    assert server.speak("Anyone?").status_code == 503
    assert server.proc.wait(30) == 1


def test_folders_named_like_packages_in_the_working_directory_do_not_shadow_them(
    start_server: Any, tmp_path: Path
) -> None:
    """Issue 19.1: `python -m sidecar` put the working directory first on sys.path, so a local
    `triton/` shadowed the installed one and every sidecar crash-looped."""
    here = tmp_path / "project"
    for name in ("triton", "torch", "sidecar", "supervisor", "numpy"):
        (here / name).mkdir(parents=True)
        (here / name / "__init__.py").write_text(
            f"raise ImportError('the local {name}/ folder was imported')\n"
        )
    script = Path(sys.executable).with_name(
        "omnivoice-supervisor"
    )  # the installed entry point: no cwd on sys.path
    server = start_server(cwd=here, command=(str(script),))
    assert server.speak("Hello from a crowded folder.", response_format="wav").status_code == 200
    assert "local" not in server.log.read_text()


def test_a_second_server_on_the_same_data_directory_says_who_holds_it_in_one_line(
    start_server: Any, tmp_path: Path
) -> None:
    """Issue 19.6: the second server died with a 10-line traceback from the job store's lock."""
    data = str(tmp_path / "shared-data")
    first = start_server("--data-dir", data)
    port = first.url.rsplit(":", 1)[1]
    second = start_server("--data-dir", data, wait_ready=False)
    assert second.proc.wait(60) == 2
    output = second.log.read_text()
    assert "Traceback" not in output
    said = [line for line in output.splitlines() if data in line]
    assert len(said) == 1 and f"pid {first.proc.pid}, port {port}" in said[0], output
    assert f"omnivoice-supervisor stop --port {port}" in said[0] and "--data-dir" in said[0]
    assert first.get("/ready").status_code == 200  # the first one is untouched
