"""Each layer's q/k/v and gate/up projections as one matrix product each
(`OmniVoiceModel.fuse_projections`): in float32 on the CPU the packed path's logits are the same
bit for bit, the unpacked path reads the same weights, and memory is not doubled. Whether the
GPU's matrix products stay bit-equal too is for `bash bench/forward_probes.sh --projections`
(the runner only joins them on a GPU in half precision, when asked)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from test_packing import logits, prompts

from sidecar.devtools.checkpoint import make_checkpoint
from sidecar.runtime.batch import PackedBatch, pack
from sidecar.runtime.loader import load_model
from sidecar.runtime.model import OmniVoiceModel
from sidecar.runtime.runner import ModelRunner


@pytest.fixture
def model(tmp_path_factory: pytest.TempPathFactory) -> OmniVoiceModel:
    """A fresh tiny model for each test: joining changes it."""
    root = tmp_path_factory.mktemp("ckpt") / "tiny"
    make_checkpoint(root, "tiny", seed=0)
    return load_model(Path(root), "cpu", torch.float32)


def batch() -> PackedBatch:
    return pack(prompts(torch.Generator().manual_seed(0)))


def test_joined_projections_give_the_same_logits_bit_for_bit(model: OmniVoiceModel) -> None:
    packed = batch()
    ids = packed.input_ids[:, : min(40, packed.num_tokens)].unsqueeze(0)
    unpacked = model(ids, torch.ones_like(ids[:, 0], dtype=torch.bool), None)
    before = logits(model, packed)
    model.fuse_projections()
    assert model.llm.layers[0].self_attn.qkv_weight is not None
    assert torch.equal(logits(model, packed), before)
    after = model(ids, torch.ones_like(ids[:, 0], dtype=torch.bool), None)
    assert torch.equal(after, unpacked)


def test_the_comparison_sees_a_wrong_split(model: OmniVoiceModel) -> None:
    """k's and v's weights swapped in the joined tensor: the same check fails."""
    packed = batch()
    before = logits(model, packed)
    model.fuse_projections()
    attn = model.llm.layers[0].self_attn
    assert attn.qkv_weight is not None
    q_rows = attn.num_heads * attn.head_dim
    kv_rows = attn.num_kv_heads * attn.head_dim
    q, k, v = attn.qkv_weight.split((q_rows, kv_rows, kv_rows))
    attn.qkv_weight = torch.cat([q, v, k])
    assert not torch.equal(logits(model, packed), before)


def test_the_separate_weights_become_views_of_the_joined_ones(model: OmniVoiceModel) -> None:
    layer = model.llm.layers[0]
    q = layer.self_attn.q_proj.weight.detach().clone()
    up = layer.mlp.up_proj.weight.detach().clone()
    model.fuse_projections()
    attn, mlp = layer.self_attn, layer.mlp
    assert attn.qkv_weight is not None and mlp.gate_up_weight is not None
    for linear, joined in (
        (attn.q_proj, attn.qkv_weight),
        (attn.k_proj, attn.qkv_weight),
        (attn.v_proj, attn.qkv_weight),
        (mlp.gate_proj, mlp.gate_up_weight),
        (mlp.up_proj, mlp.gate_up_weight),
    ):
        same_memory = linear.weight.untyped_storage().data_ptr()
        assert same_memory == joined.untyped_storage().data_ptr()
    assert torch.equal(attn.q_proj.weight, q) and torch.equal(mlp.up_proj.weight, up)
    assert torch.equal(mlp.gate_up_weight[-up.shape[0] :], up)


def test_each_group_can_be_joined_alone(model: OmniVoiceModel) -> None:
    packed = batch()
    before = logits(model, packed)
    model.fuse_projections(qkv=False, gate_up=True)
    layer = model.llm.layers[0]
    assert layer.self_attn.qkv_weight is None and layer.mlp.gate_up_weight is not None
    assert torch.equal(logits(model, packed), before)
    model.fuse_projections(qkv=True, gate_up=True)  # the joined gate/up stays as it was
    assert layer.self_attn.qkv_weight is not None
    assert torch.equal(logits(model, packed), before)


def test_the_runner_joins_them_only_on_a_gpu_in_half_precision(model: OmniVoiceModel) -> None:
    runner = ModelRunner(model, use_graphs=False, fused_projections=True, fused_gate_up=True)
    assert not runner.fused_projections and not runner.fused_gate_up
    layer = model.llm.layers[0]
    assert layer.self_attn.qkv_weight is None and layer.mlp.gate_up_weight is None
