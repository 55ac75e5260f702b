"""Our HuBERT against transformers' HubertModel (its "sdpa" attention, as the reference runs it) on
the same random weights: every hidden state is equal bit for bit, for the published layout and for
the config options it leaves out (transformers is imported here only, never by the runtime)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from transformers.models.hubert.configuration_hubert import HubertConfig
from transformers.models.hubert.modeling_hubert import HubertModel

from sidecar.devtools.checkpoint import SIZES
from sidecar.runtime.codec import load_codec
from sidecar.runtime.codec_semantic import SemanticConfig, SemanticModel
from sidecar.shared.errors import CheckpointError

# As the codec builds it: SpecAugment off (no training-only `masked_spec_embed`).
TINY = {**SIZES["tiny"].semantic, "mask_time_prob": 0.0, "mask_feature_prob": 0.0}
CONFIGS = {
    "published": TINY,  # group-normed first conv, post-norm layers, even positional kernel
    "stable": {
        **TINY,
        "feat_extract_norm": "layer",
        "do_stable_layer_norm": True,
        "feat_proj_layer_norm": False,
        "num_conv_pos_embeddings": 15,
        "num_hidden_layers": 2,
    },
    "batch_norm": {**TINY, "conv_pos_batch_norm": True, "conv_bias": True},
}


def randomised(module: nn.Module, seed: int) -> dict[str, torch.Tensor]:
    """A state for `module` with every float tensor drawn at random (positive where it must be)."""
    gen = torch.Generator().manual_seed(seed)
    state = {}
    for name, t in module.state_dict().items():
        if not t.is_floating_point():
            state[name] = t  # BatchNorm's batch counter
            continue
        r = torch.randn(t.shape, generator=gen)
        if name.endswith(("running_var", "original0")):
            r = r.abs() + 0.5
        elif t.dim() >= 2:
            r = r / math.sqrt(math.prod(t.shape[1:]))
        else:
            r = r * 0.1 + (1.0 if name.endswith("norm.weight") else 0.0)
        state[name] = r
    return state


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_hidden_states_equal_transformers(name: str) -> None:
    config: dict[str, Any] = CONFIGS[name]
    ours = SemanticModel(SemanticConfig.from_dict(config)).eval()
    reference_config = HubertConfig(**config)
    reference_config._attn_implementation = "sdpa"  # what from_pretrained picks on the CPU
    theirs = HubertModel(reference_config).eval()
    state = randomised(ours, 0)
    ours.load_state_dict(state, strict=True)
    theirs.load_state_dict(state, strict=True)  # the same key names, both ways
    audio = torch.randn(2, 8000 + 320, generator=torch.Generator().manual_seed(1)) * 0.3
    with torch.inference_mode():
        got = ours(audio)
        want = theirs(audio, output_hidden_states=True).hidden_states
    assert len(got) == len(want) == config["num_hidden_layers"] + 1
    assert got[-1].shape == (2, 25, config["hidden_size"])
    for i, (g, w) in enumerate(zip(got, want)):
        assert torch.isfinite(g).all() and g.abs().max() > 1e-3
        assert torch.equal(g, w), f"hidden state {i}"


def test_config_fields_default_as_hubert_and_extras_are_ignored() -> None:
    config = SemanticConfig.from_dict({"hidden_size": 48, "vocab_size": 5, "layerdrop": 0.3})
    defaults = HubertConfig()
    assert config.hidden_size == 48
    for field in ("num_hidden_layers", "conv_dim", "conv_kernel", "num_conv_pos_embeddings"):
        value = getattr(defaults, field)
        assert getattr(config, field) == (tuple(value) if isinstance(value, list) else value)


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"feat_extract_norm": "batch"}, "feat_extract_norm"),
        ({"conv_stride": [5, 2]}, "differ in length"),
        ({"hidden_act": "mish"}, "activation"),
        ({"num_attention_heads": 5}, "multiple"),
    ],
)
def test_a_config_it_cannot_build_is_a_checkpoint_error(
    change: dict[str, Any], words: str, tmp_path: Path, checkpoint_dir: Path
) -> None:
    shutil.copytree(checkpoint_dir / "audio_tokenizer", tmp_path, dirs_exist_ok=True)
    path = tmp_path / "config.json"
    raw = json.loads(path.read_text())
    raw["semantic_model_config"].update(change)
    path.write_text(json.dumps(raw))
    with pytest.raises(CheckpointError, match=words):
        load_codec(tmp_path)
