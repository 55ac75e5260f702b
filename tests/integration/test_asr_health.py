"""The ASR sidecar's health is the server's health (issue 35.5), with real processes: a real
server on the tiny checkpoint and a real ASR sidecar on the tiny random Whisper. A stalled ASR
sidecar (SIGSTOP) costs one request its deadline (--asr-timeout-s), not its heartbeat deadline,
and the requests after it none; a failed one (its weights damaged, then killed: the respawn
cannot load) costs none. Either way speech goes out with `X-OmniVoice-QA: ...; asr=skipped`,
`/ready` stays 200 and `/health` says `asr_check: skipped`."""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.job_helpers import ended, submit, wait_job
from tests.helpers.live_server import LiveServer, live, tone_wav

LOOSE = "max_wer=1000,max_divergent_run=100000"
DEADLINE_S = 3
MISSED = "no transcript within"


@pytest.fixture(scope="module")
def whisper(whisper_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    copy = tmp_path_factory.mktemp("whisper") / "whisper"
    shutil.copytree(whisper_dir, copy)
    return copy


@pytest.fixture(scope="module")
def server(
    checkpoint_dir: Path, whisper: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    flags = (
        "--asr-model",
        str(whisper),
        "--qa-thresholds",
        LOOSE,
        "--asr-timeout-s",
        str(DEADLINE_S),
        "--cache-max-bytes",
        "0",
    )
    with live(tmp_path_factory.mktemp("asr-health"), *flags, checkpoint=checkpoint_dir) as running:
        running.wait_for(lambda b: b["asr"][0]["state"] == "ready", 120, "the ASR sidecar")
        yield running


def speak(server: LiveServer, text: str) -> tuple[str, float]:
    """The X-OmniVoice-QA of a speech answer, and how long it took."""
    start = time.monotonic()
    answer = server.request(
        "POST", "/v1/audio/speech", json={"input": text, "response_format": "wav"}
    )
    assert answer.status_code == 200, answer.text
    return answer.headers["X-OmniVoice-QA"], time.monotonic() - start


def asr_sidecar(server: LiveServer) -> dict[str, Any]:
    sidecar: dict[str, Any] = server.health()["asr"][0]
    return sidecar


def test_a_stalled_asr_sidecar_costs_one_deadline_and_speech_goes_out_unheard(
    server: LiveServer,
) -> None:
    assert speak(server, "Heard back first.")[0] == "passed; attempts=1"
    assert server.health()["asr_check"] == "on"
    pid = asr_sidecar(server)["pid"]
    os.kill(pid, signal.SIGSTOP)
    try:
        header, took = speak(server, "Said while the ASR sidecar is stopped.")
        assert header == "passed; attempts=1; asr=skipped"
        # Its deadline, not the heartbeat deadline (60 s) plus a respawn.
        assert DEADLINE_S <= took < 30, took
        assert server.log.read_text().count(MISSED) == 1
        # The next ones do not wait the deadline again.
        assert speak(server, "Said next.")[0] == "passed; attempts=1; asr=skipped"
        created = submit(server, [{"input": "A job item, unheard.", "response_format": "wav"}])
        item = wait_job(server, created["id"], ended, 120, "the job")["items"][0]
        assert item["state"] == "done" and item["qa"]["asr"] == "skipped", item
        assert server.log.read_text().count(MISSED) == 1
        # A clone reference without a transcript has nothing to go on: a 503 at the deadline.
        clip = {"file": ("ref.wav", tone_wav(2.0), "audio/wav")}
        cloned = server.request(
            "POST",
            "/v1/audio/clone",
            files=clip,
            data={"input": "Cloned.", "response_format": "wav"},
        )
        assert cloned.status_code == 503 and cloned.json()["error"]["param"] == "transcript"
        health = server.health()
        assert health["status"] == "ok" and health["asr_check"] == "skipped"
        assert server.request("GET", "/ready", auth=False).status_code == 200
    finally:
        os.kill(pid, signal.SIGCONT)


def test_a_failed_asr_sidecar_lets_speech_go_out_unheard_at_once(
    server: LiveServer, whisper: Path
) -> None:
    before = asr_sidecar(server)
    weights = whisper / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-1000])  # the respawn cannot load it
    os.kill(before["pid"], signal.SIGKILL)
    server.wait_for(
        lambda b: b["asr"][0]["restarts"] > before["restarts"] and b["asr"][0]["last_error"],
        120,
        "the respawn to fail",
    )
    missed = server.log.read_text().count(MISSED)
    header, _ = speak(server, "Said while the ASR sidecar cannot load.")
    assert header == "passed; attempts=1; asr=skipped"
    assert server.log.read_text().count(MISSED) == missed  # no deadline waited out
    health = server.health()
    assert health["asr"][0]["state"] != "ready" and health["asr_check"] == "skipped", health
    assert server.request("GET", "/ready", auth=False).status_code == 200
