"""Helpers for the job tests: follow a job over HTTP, decode a result file, run the synth command."""

from __future__ import annotations

import io
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import av

from tests.helpers.harness import assert_gone
from tests.helpers.live_server import KEY, REPO_ROOT, LiveServer
from tests.helpers.waits import wait_until

RATE = 24000


def submit(
    server: LiveServer, items: list[dict[str, Any]], key: str | None = None
) -> dict[str, Any]:
    headers = {"Idempotency-Key": key} if key else {}
    reply = server.request("POST", "/v1/jobs", json={"items": items}, headers=headers)
    assert reply.status_code == 202, reply.text
    job: dict[str, Any] = reply.json()
    return job


def job(server: LiveServer, job_id: str) -> dict[str, Any]:
    reply = server.request("GET", f"/v1/jobs/{job_id}")
    assert reply.status_code == 200, reply.text
    body: dict[str, Any] = reply.json()
    return body


def wait_job(
    server: LiveServer,
    job_id: str,
    predicate: Callable[[dict[str, Any]], bool],
    timeout_s: float,
    what: str,
) -> dict[str, Any]:
    """Poll the job until predicate(job) holds; fail naming `what`, with the server's log, after timeout_s."""
    deadline = time.monotonic() + timeout_s
    while True:
        body = job(server, job_id)
        if predicate(body):
            return body
        if time.monotonic() > deadline or server.proc.poll() is not None:
            raise AssertionError(
                f"timed out waiting for {what}: {body['state']} {body['progress']}\n{server.log.read_text()[-3000:]}"
            )
        time.sleep(0.2)  # the poll of this wait, not a wait of its own


def ended(body: dict[str, Any]) -> bool:
    return (
        body["state"] in ("completed", "failed", "cancelled") and body["progress"]["running"] == 0
    )


def decoded_seconds(data: bytes, fmt: str) -> float:
    """Seconds of audio in a whole result file, decoded to its end by libav (pcm: s16le at 24 kHz)."""
    if fmt == "pcm":
        assert len(data) % 2 == 0
        return len(data) / 2 / RATE
    with av.open(io.BytesIO(data)) as container:
        stream = container.streams.audio[0]
        samples = sum(frame.samples for frame in container.decode(stream))
        return samples / stream.codec_context.sample_rate


def run_synth(
    *args: str, timeout_s: float = 300, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m supervisor synth ARGS` as a user runs it; its output is returned for the asserts."""
    argv = [sys.executable, "-m", "supervisor", "synth", *args]
    return subprocess.run(
        argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout_s, env=env
    )


def synth_cut_by_a_server_kill(
    server: LiveServer, argv: list[str], made: Callable[[], bool], what: str
) -> tuple[int, str, list[int]]:
    """Run `python -m supervisor synth ARGV` until `made()` holds, then SIGKILL the server under
    it: (synth's exit code, its stderr, the killed server's sidecar pids). A synth that exits
    before `made()` fails the wait; one still running after a failure is killed, not left to
    the next test."""
    command = [sys.executable, "-m", "supervisor", "synth", *argv]
    synth = subprocess.Popen(command, cwd=REPO_ROOT, stderr=subprocess.PIPE, text=True)

    def running_and_made() -> bool:
        assert synth.poll() is None, f"synth exited before {what}"
        return made()

    try:
        wait_until(running_and_made, 120, f"synth: {what}")
        sidecars = [s["pid"] for s in server.health()["sidecars"] if s["pid"]]
        server.proc.send_signal(signal.SIGKILL)
        server.proc.wait()
        _, stderr = synth.communicate(timeout=60)
    finally:
        if synth.poll() is None:
            synth.kill()
            synth.communicate()
    return synth.returncode, stderr, sidecars


def wait_gone(pids: list[int], timeout_s: float = 10.0) -> None:
    """Sidecars whose supervisor was SIGKILLed exit on their own within about a second."""

    def gone() -> bool:
        try:
            assert_gone(pids)
        except AssertionError:
            return False
        return True

    wait_until(gone, timeout_s, f"the sidecars {pids} to exit")


__all__ = [
    "KEY",
    "decoded_seconds",
    "ended",
    "job",
    "run_synth",
    "submit",
    "synth_cut_by_a_server_kill",
    "wait_gone",
    "wait_job",
]
