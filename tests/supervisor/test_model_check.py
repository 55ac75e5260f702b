"""`serve` checks --model before its port opens: one line saying what to do, a prompt exit 2.

Issue 19.3: a model that could not be loaded was reported late, once per sidecar attempt, and
the server answered 503 for 30 s before exiting. These run the real command line.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from supervisor.settings import Settings
from supervisor.supervision.model_check import model_problem


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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


def test_a_hub_id_online_is_left_to_the_sidecar(monkeypatch: pytest.MonkeyPatch) -> None:
    """Online, only a download can tell; nothing is refused up front (no network is touched here)."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    assert model_problem(Settings(model="k2-fsa/OmniVoice")) is None
    assert model_problem(Settings(engine="null")) is None
