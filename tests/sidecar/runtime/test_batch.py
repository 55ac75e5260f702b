"""Packing arithmetic (sidecar/runtime/batch.py), table-driven: segments, positions, head columns."""

from __future__ import annotations

import pytest
import torch

from sidecar.runtime.batch import pack, padded_index

MASK = 1024


def prompt(c_len: int, audio_start: int, t_len: int, fill: int) -> tuple[torch.Tensor, int, int]:
    ids = torch.full((8, c_len), fill, dtype=torch.long)
    ids[:, c_len - t_len :] = MASK
    return ids, audio_start, t_len


@pytest.mark.parametrize(
    "layout",
    [
        [(10, 4, 3)],
        [(10, 4, 3), (7, 2, 5)],
        [(5, 0, 5), (12, 6, 2), (9, 3, 4)],
    ],
)
def test_segments_positions_and_head_columns(layout: list[tuple[int, int, int]]) -> None:
    batch = pack([prompt(c, a, t, fill=i + 1) for i, (c, a, t) in enumerate(layout)])
    lens = [n for c, _, t in layout for n in (c, t)]
    assert batch.segment_lens == lens
    assert batch.cu_seqlens.tolist() == [sum(lens[:i]) for i in range(len(lens) + 1)]
    assert batch.num_tokens == sum(lens) and batch.max_seqlen == max(lens)
    assert batch.target_offsets == [
        sum(t for _, _, t in layout[:i]) for i in range(len(layout) + 1)
    ]
    # Positions restart at 0 in every segment.
    for start, end in zip(batch.cu_seqlens.tolist(), batch.cu_seqlens.tolist()[1:]):
        assert batch.positions[start:end].tolist() == list(range(end - start))
    s = batch.num_targets
    cond, uncond = batch.head_index[:s], batch.head_index[s:]
    # Every head column holds a MASK target, the cond ones at the end of their prompt.
    assert (batch.input_ids[:, cond] == MASK).all() and (batch.input_ids[:, uncond] == MASK).all()
    for i, (c, a, t) in enumerate(layout):
        seg = batch.cu_seqlens[2 * i].item()
        assert cond[batch.target_offsets[i] : batch.target_offsets[i + 1]].tolist() == list(
            range(seg + c - t, seg + c)
        )
        # audio_mask: false on style/text, true from audio_start on, true on the whole uncond segment.
        assert batch.audio_mask[seg : seg + a].tolist() == [False] * a
        assert batch.audio_mask[seg + a : seg + c + t].all()


def test_padded_index_maps_items_to_a_grid_with_a_sentinel() -> None:
    index, valid = padded_index([0, 3, 4, 9])
    assert index.tolist() == [[0, 1, 2, 9, 9], [3, 9, 9, 9, 9], [4, 5, 6, 7, 8]]
    assert valid.sum(dim=1).tolist() == [3, 1, 5]


@pytest.mark.parametrize("bad", [(10, 4, 0), (10, 8, 3), (10, -1, 3)])
def test_impossible_layouts_are_refused(bad: tuple[int, int, int]) -> None:
    c, a, t = bad
    with pytest.raises(ValueError, match="bad prompt layout"):
        pack([(torch.zeros((8, c), dtype=torch.long), a, t)])
