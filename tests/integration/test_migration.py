"""Users of omnivoice-triton-server and OmniVoice-Studio switch by changing the command: real
servers on the tiny checkpoint, started the way those users start theirs, checked through
/health, the log and behaviour, then stopped by pid file and by port (docs/MIGRATING.md)."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers.harness import SPAWN_S, assert_gone
from tests.helpers.live_server import REPO_ROOT, free_port, tone_wav
from tests.helpers.waits import wait_until

WORDS_36 = (
    "The harbour opens at dawn and the first ferry leaves at six. Fishing boats come back before noon with the catch. "
    "In the evening the lights along the pier are lit one by one, and the town goes quiet."
)


def launch(argv: list[str], env: dict[str, str], output: Path) -> subprocess.Popen[bytes]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OMNIVOICE_")}
    environ.update(OMP_NUM_THREADS="1", **env)
    with output.open("wb") as out:  # the child keeps its own copy of the log's descriptor
        return subprocess.Popen(
            [sys.executable, "-m", "supervisor", *argv],
            cwd=REPO_ROOT,
            env=environ,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def wait_ok(url: str, proc: subprocess.Popen[bytes], output: Path) -> dict[str, Any]:
    deadline = time.monotonic() + SPAWN_S
    while True:
        try:
            body: dict[str, Any] = httpx.get(url + "/health", timeout=5).json()
            if body["status"] == "ok":
                return body
        except httpx.TransportError:
            pass
        assert proc.poll() is None and time.monotonic() < deadline, output.read_text()[-3000:]
        time.sleep(0.05)  # the poll of this wait, not a wait of its own


def metric(text: str, name: str) -> float:
    found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def stop(*args: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OMNIVOICE_")}
    return subprocess.run(
        [sys.executable, "-m", "supervisor", "stop", *args],
        cwd=REPO_ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def cleanup() -> Any:
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_a_triton_server_command_line(
    checkpoint_dir: Path, tmp_path: Path, cleanup: list[subprocess.Popen[bytes]]
) -> None:
    port, logs, pid_file = free_port(), tmp_path / "logs", tmp_path / "run" / "omnivoice.pid"
    argv = [
        "start",
        "--model-id",
        str(checkpoint_dir),
        "--gpu-inferer",
        "1",
        "--max-batch-size",
        "16",
        "--max-batch-latency",
        "250",
        "--num-step",
        "32",
        "--log-dir",
        str(logs),
        "--pid-file",
        str(pid_file),
        "--port",
        str(port),
        "--text-chunk-words",
        "12",
        "--max-continuity-audio-tokens",
        "50",
        "--max-continuity-text-words",
        "8",
        "--max-clone-audio-prompt-cache",
        "4",
        "--fastapi-workers",
        "2",
        "--cuda-stream-count",
        "2",
        "--runner-mode",
        "hybrid",
        "--cuda-graph-max-width",
        "512",
        # ours, to keep the test short: its own state, a one-step warm-up, a quick stop
        "--data-dir",
        str(tmp_path / "data"),
        "--warmup-steps",
        "1",
        "--stop-timeout-s",
        "5",
    ]
    proc = launch(argv, {}, tmp_path / "stdout.log")
    cleanup.append(proc)
    url = f"http://127.0.0.1:{port}"
    health = wait_ok(url, proc, tmp_path / "stdout.log")
    sidecar_pids = [s["pid"] for s in health["sidecars"]]

    # Each setting took effect: /health shows the settings in effect ...
    s = health["settings"]
    assert (
        s["model"],
        s["gpu_inferer"],
        s["max_batch_size"],
        s["max_batch_latency_ms"],
        s["num_step"],
    ) == (str(checkpoint_dir), 1, 16, 250.0, 32)
    assert (
        s["text_chunk_words"],
        s["max_continuity_audio_tokens"],
        s["max_continuity_text_words"],
        s["clone_cache_size"],
    ) == (12, 50, 8, 4)
    run_id = s["log_run_id"]
    assert (
        re.fullmatch(r"\d{8}-\d{6}", run_id)
        and s["log_dir"] == str(logs)
        and s["pid_file"] == str(pid_file)
    )
    assert s["log_file"] == str(logs / run_id / "server.log")
    # ... the log layout: a folder for the run, `latest` pointing at it, the pid file where it was asked for ...
    assert os.readlink(logs / "latest") == run_id and pid_file.read_text() == f"{proc.pid}\n"
    assert not (logs / run_id / "server.pid").exists()
    log = (logs / "latest" / "server.log").read_text()
    for flag in (
        "--fastapi-workers 2",
        "--cuda-stream-count 2",
        "--runner-mode hybrid",
        "--cuda-graph-max-width 512",
    ):
        assert re.search(rf"WARNING omnivoice.settings: {flag}: no effect here; [^\n]+\n", log), (
            flag
        )
    assert (
        "no GPU found: one sidecar runs on the CPU (--gpu-inferer 1 asks for 1 GPU sidecar)" in log
    )

    # ... and behaviour: 32 steps by default, 12-word chunks, `stream: true` as their clients send it.
    before = httpx.get(url + "/metrics", timeout=10).text
    reply = httpx.post(
        url + "/v1/audio/speech",
        json={"input": "One short line.", "response_format": "wav", "seed": 1},
        timeout=120,
    )
    assert reply.status_code == 200 and reply.headers["x-chunks"] == "1"
    after = httpx.get(url + "/metrics", timeout=10).text
    assert (
        metric(after, "omnivoice_forward_passes_total")
        - metric(before, "omnivoice_forward_passes_total")
        == 32
    )
    long = httpx.post(
        url + "/v1/audio/speech",
        json={"input": WORDS_36, "response_format": "wav", "num_step": 4},
        timeout=120,
    )
    assert long.status_code == 200 and long.headers["x-chunks"] == "3", long.text
    events = []
    with httpx.stream(
        "POST",
        url + "/v1/audio/speech",
        json={"input": "Streamed.", "stream": True, "num_step": 4},
        timeout=120,
    ) as sse:
        assert sse.headers["content-type"].startswith("text/event-stream")
        events = [json.loads(line[6:]) for line in sse.iter_lines() if line.startswith("data: ")]
    pcm = b"".join(
        base64.b64decode(e["audio"]) for e in events if e["type"] == "speech.audio.delta"
    )
    assert (
        events[-1]["type"] == "speech.audio.done"
        and len(pcm) > 24000 * 2 * 0.3
        and pcm[:4] != b"RIFF"
    )  # raw PCM, as there

    # The same one-shot clone twice, with their form names: one encode, then a cache hit.
    form = {
        "text": "Welcome aboard.",
        "ref_text": "A steady tone, a second and a half.",
        "response_format": "wav",
        "num_step": "4",
        "seed": "3",
    }
    replies = [
        httpx.post(
            url + "/v1/audio/clone",
            data=form,
            files={"ref_audio": ("ref.wav", tone_wav(1.5), "audio/wav")},
            timeout=120,
        )
        for _ in range(2)
    ]
    assert [r.status_code for r in replies] == [200, 200] and replies[0].content == replies[
        1
    ].content, replies[0].text
    cloned = httpx.get(url + "/metrics", timeout=10).text
    assert (
        metric(cloned, "omnivoice_clone_prompt_cache_misses_total")
        - metric(after, "omnivoice_clone_prompt_cache_misses_total")
        == 1
    )
    assert (
        metric(cloned, "omnivoice_clone_prompt_cache_hits_total")
        - metric(after, "omnivoice_clone_prompt_cache_hits_total")
        == 1
    )
    assert (
        metric(cloned, 'omnivoice_batch_size_count{kind="encode"}')
        - metric(after, 'omnivoice_batch_size_count{kind="encode"}')
        == 1
    )
    b64 = httpx.post(
        url + "/v1/audio/clone",
        data={**form, "ref_audio_base64": base64.b64encode(tone_wav(1.5)).decode()},
        timeout=120,
    )
    assert (
        b64.status_code == 200 and b64.content == replies[0].content
    )  # the same samples: the same cached prompt
    assert metric(
        httpx.get(url + "/metrics", timeout=10).text, 'omnivoice_batch_size_count{kind="encode"}'
    ) == metric(cloned, 'omnivoice_batch_size_count{kind="encode"}')

    # `stop --pid-file F --no-port`: a clean drain, exit 0, the pid file gone, no sidecar left.
    done = stop("--pid-file", str(pid_file), "--no-port")
    assert done.returncode == 0 and f"pid {proc.pid} exited after" in done.stdout, (
        done.stdout + done.stderr
    )
    assert proc.wait(10) == 0 and not pid_file.exists()
    assert_gone(sidecar_pids)


def test_studio_environment_names(
    checkpoint_dir: Path, tmp_path: Path, cleanup: list[subprocess.Popen[bytes]]
) -> None:
    port = free_port()
    env = {
        "OMNIVOICE_MODEL_ID": str(checkpoint_dir),
        "OMNIVOICE_SIDECAR_RECV_TIMEOUT_S": "5",
        "OMNIVOICE_SIDECAR_IDLE_TIMEOUT_S": "1",
        "OMNIVOICE_API_KEY": "sk-studio",
        "OMNIVOICE_TTS_BACKEND": "omnivoice-subprocess",
        "OMNIVOICE_PORT": str(port),
        "OMNIVOICE_DATA_DIR": str(tmp_path / "data"),
        "OMNIVOICE_WARMUP_STEPS": "1",
        "OMNIVOICE_STOP_TIMEOUT_S": "5",
    }
    output = tmp_path / "stdout.log"
    proc = launch(["serve"], env, output)
    cleanup.append(proc)
    url = f"http://127.0.0.1:{port}"
    wait_ok(url, proc, output)
    # /health shows the settings to a caller with a key
    s = httpx.get(url + "/health", headers={"Authorization": "Bearer sk-studio"}, timeout=5).json()[
        "settings"
    ]
    assert (s["model"], s["heartbeat_timeout_s"], s["idle_reap_s"], s["api_keys"]) == (
        str(checkpoint_dir),
        30.0,
        1.0,
        1,
    )
    log = output.read_text()
    assert (
        "OMNIVOICE_SIDECAR_RECV_TIMEOUT_S=5: raised to its floor of 30 s (as OmniVoice-Studio does), so --heartbeat-timeout-s is 30"
        in log
    )
    assert (
        "OMNIVOICE_TTS_BACKEND=omnivoice-subprocess: no effect here; the model always runs in a crash-isolated sidecar"
        in log
    )

    # The key from OMNIVOICE_API_KEY guards the API; a Studio client's fields work.
    body = {
        "model": "omnivoice",
        "input": "Scheduled announcement.",
        "voice": "default",
        "instruct": "female, low pitch",
        "num_step": 4,
        "seed": 5,
        "denoise": True,
        "preprocess_prompt": True,
        "response_format": "wav",
    }
    assert httpx.post(url + "/v1/audio/speech", json=body, timeout=30).status_code == 401
    key = {"Authorization": "Bearer sk-studio"}
    assert (
        httpx.post(url + "/v1/audio/speech", json=body, headers=key, timeout=120).status_code == 200
    )

    # Idle reaping after 1 s (OMNIVOICE_SIDECAR_IDLE_TIMEOUT_S); the next request starts a sidecar again.
    wait_until(
        lambda: httpx.get(url + "/health", timeout=5).json()["sidecars"][0]["state"] == "reaped",
        30,
        f"the idle sidecar to be reaped; log: {output.read_text()[-2000:]}",
    )
    assert (
        httpx.get(url + "/ready", timeout=5).status_code == 200
    )  # a reaped sidecar is still capacity
    again = httpx.post(url + "/v1/audio/speech", json=body, headers=key, timeout=120)
    assert again.status_code == 200
    pids = [
        s["pid"]
        for s in httpx.get(url + "/health", headers=key, timeout=5).json()["sidecars"]
        if s["pid"]
    ]

    # `stop --port P`: the same clean end.
    done = stop("--port", str(port))
    assert done.returncode == 0 and f"pid {proc.pid} exited after" in done.stdout, (
        done.stdout + done.stderr
    )
    assert proc.wait(10) == 0
    assert_gone(pids)


def test_request_timeout_s_answers_504_and_frees_the_queue(tmp_path: Path) -> None:
    from tests.helpers.live_server import live

    with live(tmp_path, "--request-timeout-s", "30", faults=True) as server:
        started = time.monotonic()
        slow = server.request(
            "POST",
            "/v1/audio/speech",
            json={"input": "Too slow. [[fault:slow:3]]", "request_timeout_s": 1},
        )
        assert slow.status_code == 504 and time.monotonic() - started < 2.8
        assert (
            slow.json()["error"]["code"] == "request_timeout"
            and "request_timeout_s of 1 s" in slow.json()["error"]["message"]
        )
        # the task was cancelled; nothing of it stays admitted
        wait_until(lambda: not server.health()["queue"]["tasks"], 10, "an empty queue")
        events = server.request(
            "POST",
            "/v1/audio/speech",
            json={"input": "Also slow. [[fault:slow:3]]", "stream": True, "request_timeout_s": 1},
        )
        assert events.status_code == 504  # no audio had gone out yet: a status, not an event
        # A batch already running in the sidecar runs to its end (its answer is dropped): the next request waits for it.
        fast = server.request(
            "POST",
            "/v1/audio/speech",
            json={"input": "Quick.", "request_timeout_s": 20, "response_format": "wav"},
        )
        assert fast.status_code == 200 and server.health()["settings"]["request_timeout_s"] == 30.0
