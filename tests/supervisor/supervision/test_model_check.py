"""`serve` checks --model before its port opens: one line saying what to do, a prompt exit 2.

Issue 19.3: a model that could not be loaded was reported late, once per sidecar attempt, and
the server answered 503 for 30 s before exiting. Issue 37.1: the same online, for a Hugging Face
id the hub does not have (a local stand-in for the hub answers). These run the real command line.
"""

from __future__ import annotations

import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from sidecar.shared import layout
from supervisor.settings import Settings
from supervisor.supervision.model_check import model_problem
from tests.helpers.ports import free_port


def serve(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "supervisor", "serve", "--port", str(free_port()), *argv]
    return subprocess.run(
        command, capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})}
    )


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_a_missing_directory(tmp_path: Path) -> None:
    line = one_line(serve("--model", str(tmp_path / "nope")))
    assert "not found" in line and "--model /path/to/checkpoint" in line


def test_an_incomplete_checkpoint_names_what_is_missing(
    checkpoint_dir: Path, tmp_path: Path
) -> None:
    ckpt = tmp_path / "ckpt"
    shutil.copytree(checkpoint_dir, ckpt)
    (ckpt / "audio_tokenizer" / "model.safetensors").unlink()
    line = one_line(serve("--model", str(ckpt)))
    assert "missing audio_tokenizer/model.safetensors" in line


def test_an_uncached_hub_id_when_offline(tmp_path: Path) -> None:
    line = one_line(
        serve(
            "--model",
            "nobody/no-such-omnivoice",
            env={"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path)},
        )
    )
    assert (
        "not in the Hugging Face cache" in line and "hf download nobody/no-such-omnivoice" in line
    )


def test_no_model_at_all_says_what_to_give_and_not_the_benchmark_engine() -> None:
    line = one_line(serve(env={"OMNIVOICE_MODEL": ""}))
    assert (
        "--model /path/to/checkpoint" in line and "k2-fsa/OmniVoice" in line and "null" not in line
    )


class StandInHub(http.server.BaseHTTPRequestHandler):
    """The hub's model-info route (GET /api/models/OWNER/NAME...): 404 for an unknown id, as the
    hub answers; `owner/half` exists but lacks the audio tokenizer's weights. Every request is
    counted, so a test can tell that the hub was asked."""

    asked: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        StandInHub.asked.append(self.path)
        if self.path.startswith("/api/models/owner/half"):
            files = [
                name
                for name in layout.REQUIRED_FILES
                if name != "audio_tokenizer/model.safetensors"
            ]
            body = json.dumps({"id": "owner/half", "siblings": [{"rfilename": f} for f in files]})
            self.send_response(200)
        else:
            body = json.dumps({"error": "Repository not found"})
            self.send_response(404)
            self.send_header("X-Error-Code", "RepoNotFound")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def hub() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), StandInHub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def online(hub: str, tmp_path: Path) -> dict[str, str]:
    """HF_HUB_OFFLINE unset (serve() merges into os.environ, so it is blanked: "" reads as online)."""
    return {"HF_ENDPOINT": hub, "HF_HUB_OFFLINE": "", "HF_HOME": str(tmp_path)}


def test_an_unknown_hub_id_online_fails_before_the_port_opens(hub: str, tmp_path: Path) -> None:
    """Issue 37.1: the hub's 404 is one line and status 2, at once, and the port never opened."""
    port = free_port()
    began = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "supervisor",
            "serve",
            "--port",
            str(port),
            "--model",
            "k2-fsa/NoSuchModel",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **online(hub, tmp_path)},
    )
    took = time.monotonic() - began
    line = one_line(done)
    assert "'k2-fsa/NoSuchModel' is not a model on " + hub in line, line
    assert any(path.startswith("/api/models/k2-fsa/NoSuchModel") for path in StandInHub.asked)
    assert "Uvicorn running" not in done.stdout + done.stderr and took < 15, took
    with socket.socket() as sock:  # nothing listens there: it never opened
        assert sock.connect_ex(("127.0.0.1", port)) != 0


def test_a_hub_repository_without_the_checkpoint_files(hub: str, tmp_path: Path) -> None:
    line = one_line(serve("--model", "owner/half", env=online(hub, tmp_path)))
    assert "'owner/half' on " + hub + " is not an OmniVoice checkpoint" in line, line
    assert "missing audio_tokenizer/model.safetensors" in line, line


def test_a_hub_that_cannot_be_reached(tmp_path: Path) -> None:
    line = one_line(
        serve("--model", "owner/any", env=online(f"http://127.0.0.1:{free_port()}", tmp_path))
    )
    assert "cannot be reached" in line and "HF_HUB_OFFLINE=1" in line, line
    assert "hf download owner/any" in line, line


def test_the_benchmark_engine_needs_no_model() -> None:
    assert model_problem(Settings(engine="null").sidecar) is None


def test_synth_with_a_model_that_cannot_work_says_serves_line_and_exits_2(tmp_path: Path) -> None:
    """The server `synth --model` starts refuses the model: its one line, and no 'run again'."""
    manifest = tmp_path / "m.jsonl"
    manifest.write_text('{"input": "Hello."}\n')
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "supervisor",
            "synth",
            str(manifest),
            "--out",
            str(tmp_path / "out"),
            "--model",
            str(tmp_path / "nope"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "exited with status 2 before it was ready: omnivoice-supervisor serve: --model: " in (
        done.stderr
    )
    assert "run the same command again" not in done.stderr
