"""Fused q/k/v and gate/up projections (`OmniVoiceModel.fuse_projections`, the GPU's packed
path) on the CPU: same logits, same checkpoint keys, no extra weight memory, padded path untouched."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch

from sidecar.batch import pack
from sidecar.loader import load_model
from sidecar.model import OmniVoiceModel
from sidecar.runner import ModelRunner


@pytest.fixture(scope="module")
def model(checkpoint_dir: Path) -> OmniVoiceModel:
    return load_model(checkpoint_dir, "cpu", torch.float32)


def packed_inputs(model: OmniVoiceModel, lengths: list[tuple[int, int, int]]) -> tuple:
    gen = torch.Generator().manual_seed(0)
    cfg, prompts = model.cfg, []
    for c_len, audio_start, t_len in lengths:
        ids = torch.randint(0, 300, (cfg.num_codebooks, c_len), generator=gen)
        ids[:, audio_start:] = torch.randint(0, cfg.audio_mask_id, (cfg.num_codebooks, c_len - audio_start), generator=gen)
        ids[:, c_len - t_len :] = cfg.audio_mask_id
        prompts.append((ids, audio_start, t_len))
    b = pack(prompts)
    return b.input_ids, b.audio_mask, b.positions, b.cu_seqlens, b.max_seqlen, b.head_index


def test_fused_packed_forward_matches_unfused(model: OmniVoiceModel) -> None:
    fused = copy.deepcopy(model)
    fused.fuse_projections()
    args = packed_inputs(model, [(30, 10, 12), (17, 5, 9), (120, 20, 90)])
    with torch.inference_mode():
        want = model.forward_packed(*args)
        got = fused.forward_packed(*args)
        padded = (args[0][:, :30].unsqueeze(0), args[1][:30].unsqueeze(0))
        assert torch.equal(fused.forward(*padded), model.forward(*padded))
    # The same dot products in a wider product: bit for bit equal with the CPU BLAS seen so far; the
    # tolerance leaves room for another BLAS to block the sums differently.
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)


def test_fusing_keeps_keys_and_shares_memory(model: OmniVoiceModel) -> None:
    fused = copy.deepcopy(model)
    fused.fuse_projections()
    assert fused.state_dict().keys() == model.state_dict().keys()
    attn, mlp = fused.llm.layers[0].self_attn, fused.llm.layers[0].mlp
    assert attn.q_proj.weight.data_ptr() == attn.qkv_weight.data_ptr()
    assert mlp.up_proj.weight.untyped_storage().data_ptr() == mlp.gate_up_weight.untyped_storage().data_ptr()
    assert torch.equal(attn.v_proj.weight, model.llm.layers[0].self_attn.v_proj.weight)


def test_runner_fuses_only_on_request_or_on_a_gpu(model: OmniVoiceModel) -> None:
    plain = copy.deepcopy(model)
    ModelRunner(plain, use_graphs=False)
    assert plain.llm.layers[0].self_attn.qkv_weight is None
    fused = copy.deepcopy(model)
    ModelRunner(fused, use_graphs=False, fuse=True)
    assert fused.llm.layers[0].mlp.gate_up_weight is not None
