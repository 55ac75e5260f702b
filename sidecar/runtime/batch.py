"""Prompts to one packed sequence and back: pure index arithmetic, no model, no device work.

The reference pads every row of a batch to the longest conditional prompt, unconditional rows
included. Here each item contributes two segments, laid end to end with no padding:

    [cond 0 | uncond 0 | cond 1 | uncond 1 | ...]      positions restart at 0 in each segment

`cu_seqlens` marks the segment boundaries for varlen attention. The network's head runs only on
the target columns, gathered by `head_index` as [cond targets of every item | uncond targets of
every item]; both halves are laid out on one "target axis" of length sum(T_i), where item i owns
columns [target_offsets[i], target_offsets[i+1]).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass
class PackedBatch:
    input_ids: torch.Tensor  # [C, N] long
    audio_mask: torch.Tensor  # [N] bool
    positions: torch.Tensor  # [N] long, restarting at 0 in every segment
    cu_seqlens: torch.Tensor  # [2B + 1] int32
    max_seqlen: int
    head_index: torch.Tensor  # [2 * S] long: cond target columns, then uncond ones (S = sum T_i)
    target_offsets: list[int]  # [B + 1]: item i owns target columns [off[i], off[i+1])
    segment_lens: list[int]  # [2B]

    @property
    def num_tokens(self) -> int:
        return int(self.input_ids.shape[1])

    @property
    def num_targets(self) -> int:
        return self.target_offsets[-1]


def pack(prompts: Sequence[tuple[torch.Tensor, int, int]]) -> PackedBatch:
    """Pack (input_ids [C, c_len], audio_start, target_len) triples; the target is the last
    target_len columns of each prompt."""
    ids, masks, positions, lens, cond_idx, uncond_idx, offsets = [], [], [], [], [], [], [0]
    start = 0
    for input_ids, audio_start, t_len in prompts:
        c_len = int(input_ids.shape[1])
        if not 0 < t_len <= c_len - audio_start or audio_start < 0:
            raise ValueError(
                f"bad prompt layout: c_len {c_len}, audio_start {audio_start}, target_len {t_len}"
            )
        target = input_ids[:, c_len - t_len :]
        ids += [input_ids, target]
        mask = torch.zeros(c_len + t_len, dtype=torch.bool)
        mask[audio_start:] = True  # reference audio and target; the whole uncond segment
        masks.append(mask)
        positions += [torch.arange(c_len), torch.arange(t_len)]
        cond_idx.append(torch.arange(start + c_len - t_len, start + c_len))
        uncond_idx.append(torch.arange(start + c_len, start + c_len + t_len))
        lens += [c_len, t_len]
        start += c_len + t_len
        offsets.append(offsets[-1] + t_len)
    cu = torch.zeros(len(lens) + 1, dtype=torch.int32)
    cu[1:] = torch.cumsum(torch.tensor(lens), 0)
    return PackedBatch(
        input_ids=torch.cat(ids, dim=1),
        audio_mask=torch.cat(masks),
        positions=torch.cat(positions),
        cu_seqlens=cu,
        max_seqlen=max(lens),
        head_index=torch.cat(cond_idx + uncond_idx),
        target_offsets=offsets,
        segment_lens=lens,
    )


def padded_index(target_offsets: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Map the target axis to a padded [B, T_max] grid: `index[i, t]` is item i's column t, or S
    (one past the end, a sentinel column) where t >= T_i; `valid` says which entries are real."""
    lens = torch.tensor([b - a for a, b in itertools.pairwise(target_offsets)])
    t = torch.arange(int(lens.max()))
    valid = t.unsqueeze(0) < lens.unsqueeze(1)
    index = torch.tensor(target_offsets[:-1]).unsqueeze(1) + t.unsqueeze(0)
    return torch.where(valid, index, torch.full_like(index, target_offsets[-1])), valid
