"""`serve` checks --asr-model before its port opens, as it checks --model: one line, exit 2.

Issue 35.5: a Whisper checkpoint that could not load left `/health` ok and `/ready` 200 while
every speech request answered 503. These run the real command line on a real tiny Whisper
(`make-checkpoint --kind whisper`), damaged the ways a copy or a download goes wrong.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.ports import free_port


def refused(asr_model: str, tmp_path: Path, **env: str) -> str:
    """serve --asr-model ...: its one line on stderr, after asserting exit 2 and nothing else."""
    command = [
        sys.executable,
        "-m",
        "supervisor",
        "serve",
        "--engine",
        "null",
        "--port",
        str(free_port()),
        "--data-dir",
        str(tmp_path / "data"),
        "--asr-model",
        asr_model,
    ]
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HF_HOME": str(tmp_path / "hf"), **env},
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and not done.stdout, done.stderr
    assert lines[0].startswith("omnivoice-supervisor serve: --asr-model: "), lines[0]
    return lines[0]


@pytest.fixture
def whisper(whisper_dir: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "whisper"
    shutil.copytree(whisper_dir, copy)
    return copy


def test_weights_cut_short(whisper: Path, tmp_path: Path) -> None:
    weights = whisper / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-1000])
    line = refused(str(whisper), tmp_path)
    assert "damaged" in line and "model.safetensors" in line and "cut short" in line


def test_weights_overwritten(whisper: Path, tmp_path: Path) -> None:
    weights = whisper / "model.safetensors"
    weights.write_bytes(os.urandom(weights.stat().st_size))
    line = refused(str(whisper), tmp_path)
    assert "not a safetensors file" in line


def test_a_config_that_does_not_parse(whisper: Path, tmp_path: Path) -> None:
    (whisper / "config.json").write_text('{"model_type": "whisper",')
    assert "config.json" in refused(str(whisper), tmp_path)


def test_a_missing_directory_and_missing_weights(whisper: Path, tmp_path: Path) -> None:
    assert "not found" in refused(str(tmp_path / "nope"), tmp_path)
    (whisper / "model.safetensors").unlink()
    assert "missing model.safetensors" in refused(str(whisper), tmp_path)


def test_an_uncached_hub_id_offline(tmp_path: Path) -> None:
    line = refused("openai/whisper-not-cached", tmp_path, HF_HUB_OFFLINE="1")
    assert "not in the Hugging Face cache" in line and "--asr-model /path/to/checkpoint" in line


def test_a_whole_whisper_passes_the_check(whisper_dir: Path) -> None:
    from supervisor.settings import Settings
    from supervisor.supervision.model_check import model_problem

    assert model_problem(Settings(engine="null", asr_model=str(whisper_dir)).sidecar) is None


def test_a_checkpoint_says_whether_its_weights_are_random(
    whisper: Path, checkpoint_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """make-checkpoint's Whisper says so in its config.json; a checkpoint without the key (a
    published one, or the parity fixture) is taken as trained, and so is a hub id not cached."""
    from supervisor.settings import Settings
    from supervisor.supervision.model_check import random_weights

    assert random_weights(Settings(engine="null", asr_model=str(whisper)).sidecar) == [
        "--asr-model"
    ]
    both = Settings(engine="omnivoice", model=str(checkpoint_dir), asr_model=str(whisper))
    assert random_weights(both.sidecar) == ["--asr-model"]
    config = whisper / "config.json"
    config.write_text(config.read_text().replace('"random_weights": true', '"x": 1'))
    assert random_weights(Settings(engine="null", asr_model=str(whisper)).sidecar) == []
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    assert (
        random_weights(Settings(engine="null", asr_model="openai/whisper-not-cached").sidecar) == []
    )
