"""sidecar/runtime/preload.py: what a spare loads before it may use its device, and the model
it then finishes loading, which must be the one a plain load gives (tiny checkpoint, CPU)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from sidecar.runtime.omnivoice import OmniVoice
from sidecar.runtime.preload import COMPILER_MODULES, load_on_host
from sidecar.runtime.request import GenerationRequest
from sidecar.shared.errors import CheckpointError, InvalidInput


def test_a_model_finished_from_the_host_load_is_the_plain_load(checkpoint_dir: Path) -> None:
    stages: list[str] = []
    host = load_on_host(str(checkpoint_dir), "float32", stages.append)
    assert stages == ["resolve", "tokenizer", "model", "codec", "compiler"]
    assert all(name in sys.modules for name in COMPILER_MODULES)
    assert all(t.device.type == "cpu" for t in host.weights.values())
    finished = OmniVoice.load(str(checkpoint_dir), host=host)
    plain = OmniVoice.load(str(checkpoint_dir))
    for ours, theirs in ((finished.model, plain.model), (finished.codec, plain.codec)):
        a, b = ours.state_dict(), theirs.state_dict()
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    request = GenerationRequest(text="The same words.", num_step=4, seed=3)
    [one], [other] = finished.generate([request]), plain.generate([request])
    assert (one.audio == other.audio).all()


def test_what_cannot_load_fails_before_the_park(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError):
        load_on_host(str(tmp_path / "missing"), "float32", lambda stage: None)
    with pytest.raises(InvalidInput):
        load_on_host(str(tmp_path), "float8", lambda stage: None)
