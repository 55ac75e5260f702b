"""The packing check of the fidelity measurement (`bench/fidelity.py`): each item's logits from
our path alone against packed among PACK_SIZE - 1 other requests of other kinds and lengths
(half-revealed states), with the reference's own bf16 noise on the same logits for scale."""

from __future__ import annotations

from typing import Any

import torch
import workloads
from fidelity_reference import GREEDY, State
from fidelity_scores import batch_state

from sidecar.runtime.generate import BatchState, Prompt
from sidecar.runtime.omnivoice import OmniVoice as Ours
from sidecar.runtime.request import GenerationRequest, VoicePrompt

PACK_SIZE = 64  # the sidecar's largest batch


def other_prompts(ours: Ours, voice: VoicePrompt, count: int) -> list[Prompt]:
    """`count` requests of every kind and length (a long one's first chunk), half revealed."""
    rng = torch.Generator().manual_seed(3)
    out = []
    for r in workloads.mixed(count * 4, seed=9)[:count]:
        req = GenerationRequest(
            text=r.text, instruct=r.instruct, voice=voice if r.kind == "clone" else None, **GREEDY
        )
        item = ours.prompter.prepare(req)
        prompt = ours.prompter.chunk_prompt(item, ours.prompter.chunk_texts(item), 0, None)
        target = prompt.input_ids[:, -prompt.target_len :]
        shown = torch.rand(target.shape, generator=rng) < 0.5
        codes = torch.randint(0, ours.mask_id, target.shape, generator=rng)
        target[shown] = codes[shown]
        out.append(prompt)
    return out


def target_rows(state: BatchState, item: int) -> torch.Tensor:
    """Indices of one item's cond and uncond rows in the [2S, C, V] logits."""
    off, s = state.packed.target_offsets, state.packed.num_targets
    cols = torch.arange(off[item], off[item + 1])
    return torch.cat([cols, cols + s])


def packing(
    ours: Ours,
    states: list[State],
    ref32: list[torch.Tensor],
    ref16: list[torch.Tensor],
    voice: VoicePrompt,
) -> dict[str, Any]:
    """Each item alone and packed among PACK_SIZE - 1 others, in our path (graphs as served)."""
    others = other_prompts(ours, voice, PACK_SIZE - 1)
    misses = ours.runner.stats.graph_misses
    worst = noise = ours_noise = 0.0
    equal = total = items = packed_tokens = 0
    for state, a, b in zip(states, ref32, ref16):
        prompts = state.prompts()
        alone_all = batch_state(ours, prompts)
        for i, prompt in enumerate(prompts):
            rows = target_rows(alone_all, i)
            alone = batch_state(ours, [prompt]).forward()
            at = (items * 7) % PACK_SIZE
            packed_state = batch_state(ours, [*others[:at], prompt, *others[at:]])
            packed_tokens = max(packed_tokens, packed_state.packed.num_tokens)
            packed = packed_state.forward()[target_rows(packed_state, at)]
            worst = max(worst, float((packed - alone).abs().max()))
            equal, total = equal + int((packed == alone).sum()), total + alone.numel()
            noise = max(noise, float((b[rows] - a[rows]).abs().max()))
            ours_noise = max(ours_noise, float((alone - a[rows]).abs().max()))
            items += 1
    return {
        "max_abs_logit_diff": worst,
        "bf16_noise": noise,
        "items": items,
        "pack_size": PACK_SIZE,
        "largest_pack_tokens": packed_tokens,
        "identical_logits_share": equal / total,
        "ours_alone_vs_fp32_max": ours_noise,
        "graph_misses": ours.runner.stats.graph_misses - misses,
        "bf16_noise_is": "max |ref bf16 - ref fp32| over the same items' logits",
    }
