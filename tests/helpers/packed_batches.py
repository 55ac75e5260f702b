"""A tiny random model's shape and packed batches of made-up prompts, for the runtime's CPU tests
(the runner's buckets, the residual op)."""

from __future__ import annotations

import torch

from sidecar.runtime.batch import PackedBatch, pack
from sidecar.runtime.config import ModelConfig

CFG = ModelConfig(
    num_codebooks=8,
    audio_vocab_size=1025,
    audio_mask_id=1024,
    hidden_size=32,
    intermediate_size=64,
    num_layers=2,
    num_heads=4,
    num_kv_heads=2,
    head_dim=8,
    vocab_size=1100,
    rms_norm_eps=1e-6,
    rope_theta=1e6,
)


def prompts_of(lengths: list[tuple[int, int, int]]) -> list[tuple[torch.Tensor, int, int]]:
    """(input ids, audio start, target length) per item: text, then audio, then masked target."""
    prompts = []
    for c_len, audio_start, t_len in lengths:
        ids = torch.randint(0, 300, (8, c_len))
        ids[:, audio_start:] = torch.randint(0, 1024, (8, c_len - audio_start))
        ids[:, c_len - t_len :] = 1024
        prompts.append((ids, audio_start, t_len))
    return prompts


def batch_of(lengths: list[tuple[int, int, int]]) -> PackedBatch:
    return pack(prompts_of(lengths))


def forward_args(batch: PackedBatch) -> tuple:
    """The arguments of `OmniVoiceModel.forward_packed` (and `hidden_packed`) for a batch."""
    return (
        batch.input_ids,
        batch.audio_mask,
        batch.positions,
        batch.cu_seqlens,
        batch.max_seqlen,
        batch.head_index,
    )
