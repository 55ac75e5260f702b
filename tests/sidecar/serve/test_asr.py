"""The ASR sidecar as a real process (`python -m sidecar --engine whisper`) on the tiny random
Whisper that `make-checkpoint --kind whisper` writes, spoken to in frames over its pipes."""

from __future__ import annotations

import io
import itertools
import math
import os
import struct
import subprocess
import sys
import wave
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sidecar.audio.wer import words
from sidecar.shared.protocol import FROM_SIDECAR, read_frame, write_frame

READ = "Please stand clear of the closing doors."


def tone(seconds: float, rate: int) -> list[int]:
    return [int(8000 * math.sin(2 * math.pi * 220 * i / rate)) for i in range(int(seconds * rate))]


def pcm(seconds: float, rate: int = 24000) -> bytes:
    samples = tone(seconds, rate)
    return struct.pack(f"<{len(samples)}h", *samples)


def wav(seconds: float, rate: int = 24000) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm(seconds, rate))
    return out.getvalue()


class Asr:
    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        write_frame(self.proc.stdin, message)

    def receive(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        frame = read_frame(self.proc.stdout, allowed=FROM_SIDECAR)
        assert frame is not None, "the sidecar closed its channel"
        return dict(frame)

    def answers(self, batch: int) -> list[dict[str, Any]]:
        """Every frame up to and including this batch's `done`, steps left out."""
        frames = []
        while True:
            frame = self.receive()
            if frame["op"] != "step":
                frames.append(frame)
            if frame["op"] == "done" and frame["batch"] == batch:
                return frames


@pytest.fixture(scope="module")
def asr(whisper_dir: Path) -> Iterator[Asr]:
    argv = [
        sys.executable,
        "-m",
        "sidecar",
        "--engine",
        "whisper",
        "--model",
        str(whisper_dir),
        "--qa-thresholds",
        "max_wer=100,max_divergent_run=1000",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    sidecar = Asr(proc)
    try:
        yield sidecar
    finally:
        proc.kill()
        proc.wait(10)
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()


def test_it_loads_through_transformers_and_reports_ready(asr: Asr) -> None:
    frames = [asr.receive() for _ in range(2)]
    assert frames[0]["op"] == "hello"
    while frames[-1]["op"] == "progress":
        frames.append(asr.receive())
    ready = frames[-1]
    assert ready["op"] == "ready" and ready["engine"] == "whisper"
    assert ready["sample_rate"] == 16000  # the Whisper feature extractor's rate


def test_a_transcription_is_compared_with_the_text_read(asr: Asr) -> None:
    asr.send(
        {
            "op": "transcribe",
            "batch": 1,
            "id": "a",
            "audio": pcm(2.0),
            "encoding": "s16le",
            "sample_rate": 24000,
            "text": READ,
            "language": "en",
        }
    )
    transcript, done = asr.answers(1)
    assert transcript["op"] == "transcript" and transcript["id"] == "a" and done["op"] == "done"
    assert set(transcript["qa"]) == {"wer", "divergent_run"}
    # Random weights hear noise: the rate is what compare() makes of whatever came out.
    heard = words(transcript["text"])
    assert transcript["qa"]["wer"]["value"] >= (0.0 if heard else 1.0)
    assert all(check["passed"] for check in transcript["qa"].values())  # thresholds set loose


def test_audio_over_30_s_is_heard_in_windows_each_one_a_heartbeat(asr: Asr) -> None:
    asr.send(
        {
            "op": "transcribe",
            "batch": 5,
            "id": "long",
            "audio": pcm(35.0),
            "encoding": "s16le",
            "sample_rate": 24000,
            "text": READ,
            "language": None,
        }
    )
    frames = [asr.receive()]
    while frames[-1]["op"] != "done":
        frames.append(asr.receive())
    steps = [(f["step"], f["of"]) for f in frames if f["op"] == "step"]
    assert steps == [(1, 2), (2, 2)] and frames[-2]["op"] == "transcript"


def test_a_reference_file_without_a_text_is_only_transcribed(asr: Asr) -> None:
    asr.send(
        {
            "op": "transcribe",
            "batch": 2,
            "id": "ref",
            "audio": wav(3.0),
            "encoding": "file",
            "sample_rate": 0,
            "text": "",
            "language": None,
        }
    )
    transcript, _done = asr.answers(2)
    assert transcript["op"] == "transcript" and transcript["qa"] == {}
    assert isinstance(transcript["text"], str)


def test_undecodable_audio_and_generate_frames_are_refused_per_item(asr: Asr) -> None:
    asr.send(
        {
            "op": "transcribe",
            "batch": 3,
            "id": "junk",
            "audio": b"not audio",
            "encoding": "file",
            "sample_rate": 0,
            "text": READ,
            "language": None,
        }
    )
    error, _done = asr.answers(3)
    assert error["op"] == "error" and error["id"] == "junk" and error["kind"] == "invalid_input"
    asr.send(
        {
            "op": "generate",
            "batch": 4,
            "encoding": "s16le",
            "tier": "bulk",
            "items": [{"id": "g", "text": "Hi"}],
        }
    )
    error, _done = asr.answers(4)
    assert error["op"] == "error" and "only transcribes" in error["message"]


def test_make_checkpoint_kind_whisper_writes_what_transformers_loads(tmp_path: Path) -> None:
    out = tmp_path / "whisper"
    command = [sys.executable, "-m", "supervisor", "make-checkpoint", str(out), "--kind", "whisper"]
    done = subprocess.run(
        ["sh", "-c", 'umask 022 && exec "$@"', "sh", *command],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert {p.name for p in out.iterdir()} >= {
        "config.json",
        "model.safetensors",
        "generation_config.json",
        "tokenizer.json",
    }
    # Issue 37.5: the weights follow the umask like the rest (not safetensors' 0600), and the
    # command says one line, no progress bar.
    assert {p.name: p.stat().st_mode & 0o777 for p in out.iterdir()}["model.safetensors"] == 0o644
    assert "Writing" not in done.stderr + done.stdout and len(done.stdout.splitlines()) == 1
    from transformers import AutoConfig

    assert AutoConfig.from_pretrained(out).model_type == "whisper"
    full = subprocess.run([*command, "--size", "full"], capture_output=True, text=True, timeout=300)
    assert full.returncode == 2 and "tiny only" in full.stderr


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (2.0, READ),  # cross-attention over the known text, a monotonic path through it
        (0.05, READ),  # fewer 20 ms frames than tokens: each word its share
        (35.0, READ),  # past one 30 s window: each word its share
        (1.0, "One,   two\nthree."),  # words are what white space separates
    ],
)
def test_an_alignment_times_every_word_once_in_order_inside_the_audio(
    asr: Asr, seconds: float, text: str
) -> None:
    batch = 10 + int(seconds * 100)
    asr.send(
        {
            "op": "align",
            "batch": batch,
            "id": "seg",
            "audio": pcm(seconds),
            "encoding": "s16le",
            "sample_rate": 24000,
            "text": text,
            "language": "en",
        }
    )
    aligned, done = asr.answers(batch)
    assert aligned["op"] == "aligned" and aligned["id"] == "seg" and done["op"] == "done"
    timed = aligned["words"]
    assert [w["word"] for w in timed] == text.split()
    assert all(0 <= w["start"] < w["end"] <= seconds + 1e-9 for w in timed), timed
    assert all(a["end"] <= b["start"] for a, b in itertools.pairwise(timed)), timed


def test_the_monotonic_path_gives_every_row_a_frame_of_its_own() -> None:
    import numpy as np

    from sidecar.audio.align import monotonic_path

    # Each row is cheapest over its own block of frames: the path enters each row where it starts.
    cost = np.ones((3, 9))
    cost[0, 0:2] = cost[1, 2:7] = cost[2, 7:9] = 0
    assert monotonic_path(cost).tolist() == [0, 2, 7]
    # A row cheapest nowhere still holds one frame: every row is entered on a frame of its own.
    entries = monotonic_path(np.zeros((5, 5)))
    assert entries.tolist() == [0, 1, 2, 3, 4]
