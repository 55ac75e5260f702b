"""Packed segments stay apart: in float32 on the CPU, changing one item's tokens (its text, its
reference audio, its revealed target) changes no other item's logits at all, bit for bit, through
the same staged and padded bucket that a CUDA graph replays on a GPU. The GPU's FlashAttention
path is measured against the same rule by bench/fidelity.py ("packing")."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from sidecar.devtools.checkpoint import make_checkpoint
from sidecar.runtime.batch import PackedBatch, pack
from sidecar.runtime.loader import load_model
from sidecar.runtime.model import OmniVoiceModel
from sidecar.runtime.options import RuntimeOptions
from sidecar.runtime.runner import ModelRunner

MASK = 1024
# (text length, reference audio length, target length): auto voice, clone, long, short.
LAYOUT = ((14, 0, 30), (9, 25, 18), (20, 0, 61), (6, 12, 7))
BUCKET = 512  # more than the tokens, so the bucket carries padding too


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> OmniVoiceModel:
    root = tmp_path_factory.mktemp("ckpt") / "tiny"
    make_checkpoint(root, "tiny", seed=0)
    return load_model(Path(root), "cpu", torch.float32)


def prompts(gen: torch.Generator) -> list[tuple[torch.Tensor, int, int]]:
    """Half-revealed items of several kinds and lengths, drawn from `gen`."""
    out = []
    for text_len, ref_len, t_len in LAYOUT:
        text = torch.randint(0, 1000, (1, text_len), generator=gen).repeat(8, 1)
        ref = torch.randint(0, MASK, (8, ref_len), generator=gen)
        target = torch.randint(0, MASK, (8, t_len), generator=gen)
        target[torch.rand(target.shape, generator=gen) < 0.5] = MASK
        out.append((torch.cat([text, ref, target], dim=1), text_len, t_len))
    return out


def perturbed(
    items: list[tuple[torch.Tensor, int, int]], which: int
) -> list[tuple[torch.Tensor, int, int]]:
    """The same items with every token of item `which` changed: text, reference audio, target."""
    ids, audio_start, t_len = items[which]
    changed = ids.clone()
    changed[:, :audio_start] = (changed[:, :audio_start] + 7) % 1000
    changed[:, audio_start:] = (changed[:, audio_start:] + 13) % MASK
    return [(changed, audio_start, t_len) if i == which else item for i, item in enumerate(items)]


def logits(
    model: OmniVoiceModel,
    batch: PackedBatch,
    cu_seqlens: torch.Tensor | None = None,
    padding: int = 0,
) -> torch.Tensor:
    """The staged, padded bucket's forward pass (the body a CUDA graph captures), padding
    tokens filled with `padding` rather than the zeros `stage` writes."""
    runner = ModelRunner(model, RuntimeOptions(buckets=(BUCKET,), cuda_graphs=False))
    cu = batch.cu_seqlens if cu_seqlens is None else cu_seqlens
    found = runner.bucket_for(batch.num_tokens, len(batch.segment_lens), batch.max_seqlen)
    assert found is not None
    bucket, cap = found
    with torch.inference_mode():
        runner.stage(
            bucket, batch.input_ids, batch.audio_mask, batch.positions, cu, batch.head_index
        )
        bucket.inputs["input_ids"][:, batch.num_tokens :] = padding
        runner._run(bucket, cap)
        return model.head(runner.hidden_out[: batch.head_index.numel()])


def item_rows(batch: PackedBatch, item: int) -> torch.Tensor:
    """One item's cond and uncond target rows of the [2S, C, V] logits."""
    off, s = batch.target_offsets, batch.num_targets
    cols = torch.arange(off[item], off[item + 1])
    return torch.cat([cols, cols + s])


@pytest.mark.parametrize("which", range(len(LAYOUT)))
def test_one_item_changed_leaves_every_other_item_bit_for_bit(
    model: OmniVoiceModel, which: int
) -> None:
    items = prompts(torch.Generator().manual_seed(which))
    base, changed = pack(items), pack(perturbed(items, which))
    before, after = logits(model, base), logits(model, changed, padding=999)
    for i in range(len(LAYOUT)):
        rows = item_rows(base, i)
        if i == which:
            assert not torch.equal(before[rows], after[rows]), "the change must reach its own item"
        else:
            assert torch.equal(before[rows], after[rows]), f"item {which}'s tokens changed item {i}"


def test_the_comparison_sees_a_leak(model: OmniVoiceModel) -> None:
    """The same check, on a segment table that joins item 0's uncond segment to item 1's cond
    segment (a leak across one boundary), does see item 1's change in item 0."""
    items = prompts(torch.Generator().manual_seed(7))
    base, changed = pack(items), pack(perturbed(items, 1))
    leaky = torch.cat([base.cu_seqlens[:2], base.cu_seqlens[3:]])  # uncond 0 and cond 1 as one
    leaky = torch.cat([leaky, leaky[-1:]])  # same number of segments for the bucket
    rows = item_rows(base, 0)
    before, after = logits(model, base, leaky), logits(model, changed, leaky)
    assert not torch.equal(before[rows], after[rows])
