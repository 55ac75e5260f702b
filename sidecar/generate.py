"""The reference decoding algorithm: masked iterative unmasking with classifier-free guidance.

One call of `generate_tokens` runs one batch of prompts for as many steps as its longest
schedule. Per step and per item: guidance on log-probabilities, MASK forbidden, a token chosen
per position (argmax, or Gumbel over the top 10 % of classes), a confidence score with the
codebook layer penalty (plus Gumbel noise on positions), and the k most confident masked
positions revealed. Conditional rows hold [style | text | reference audio | target]; the
unconditional rows hold only the target.

Each item draws its random numbers from its own generator, in the reference's order
(class noise, then position noise, per step), so an item's output does not depend on what
else is in its batch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import torch
import torch.nn.functional as F

from sidecar.model import OmniVoiceModel

TOP_K_RATIO = 0.1  # share of classes kept when sampling a token (class_temperature > 0)
GUMBEL_EPS = 1e-10


@dataclass
class Prompt:
    """One item ready for the network: its conditional ids and how to decode it."""

    input_ids: torch.Tensor  # [C, c_len] long: style, text, reference audio, then MASK target
    audio_start: int  # first column of reference audio (or of the target)
    target_len: int
    num_step: int = 32
    guidance_scale: float = 2.0
    t_shift: float = 0.1
    layer_penalty_factor: float = 5.0
    position_temperature: float = 5.0
    class_temperature: float = 0.0
    generator: torch.Generator | None = None
    schedule: list[int] = field(init=False)

    def __post_init__(self) -> None:
        self.schedule = unmask_schedule(self.target_len * self.input_ids.shape[0], self.num_step, self.t_shift)

    @property
    def length(self) -> int:
        return int(self.input_ids.shape[1])


@lru_cache(maxsize=64)
def _time_steps(num_step: int, t_shift: float) -> tuple[float, ...]:
    # float32 throughout, like the reference (torch's symmetric linspace, float32 shift).
    t = torch.linspace(0.0, 1.0, num_step + 1)
    t = t_shift * t / (1 + (t_shift - 1) * t)
    return tuple(t.tolist())


def unmask_schedule(num_masked: int, num_step: int, t_shift: float) -> list[int]:
    """How many positions each step reveals; the last step reveals whatever remains."""
    t = _time_steps(num_step, t_shift)
    remaining, counts = num_masked, []
    for step in range(num_step):
        if step == num_step - 1:
            k = remaining
        else:
            k = min(math.ceil(num_masked * (t[step + 1] - t[step])), remaining)
        counts.append(k)
        remaining -= k
    return counts


def _gumbel(scores: torch.Tensor, temperature: float, generator: torch.Generator | None) -> torch.Tensor:
    u = torch.rand(scores.shape, generator=generator, device=scores.device, dtype=torch.float32)
    return scores / temperature - torch.log(-torch.log(u + GUMBEL_EPS) + GUMBEL_EPS)


def _choose(cond: torch.Tensor, uncond: torch.Tensor, p: Prompt, mask_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Tokens and confidence for one item's target columns ([1, C, T, V] float32 logits)."""
    if p.guidance_scale != 0:
        lc = F.log_softmax(cond, dim=-1)
        lu = F.log_softmax(uncond, dim=-1)
        log_probs = torch.log_softmax(lc + p.guidance_scale * (lc - lu), dim=-1)
    else:
        log_probs = F.log_softmax(cond, dim=-1)
    log_probs[..., mask_id] = -float("inf")
    if p.class_temperature > 0.0:
        k = math.ceil(TOP_K_RATIO * log_probs.shape[-1])
        values, indices = log_probs.topk(k, dim=-1)
        filtered = torch.full_like(log_probs, -float("inf")).scatter_(-1, indices, values)
        tokens = _gumbel(filtered, p.class_temperature, p.generator).argmax(dim=-1)
    else:
        tokens = log_probs.argmax(dim=-1)
    return tokens, log_probs.max(dim=-1)[0]


@torch.inference_mode()
def generate_tokens(
    model: OmniVoiceModel,
    prompts: Sequence[Prompt],
    on_step: Callable[[int, int], None] | None = None,
) -> list[torch.Tensor]:
    """Run one batch to completion; returns each item's tokens as a [C, T] long tensor."""
    cfg = model.cfg
    device = model.codebook_layer_offsets.device
    mask_id, num_cb = cfg.audio_mask_id, cfg.num_codebooks
    n = len(prompts)
    max_len = max(p.length for p in prompts)

    # Rows 0..n-1 conditional, n..2n-1 unconditional (the target alone), padded with MASK ids
    # that embed as text. Padding never reaches a valid position: its keys are masked out.
    ids = torch.full((2 * n, num_cb, max_len), mask_id, dtype=torch.long, device=device)
    audio_mask = torch.zeros((2 * n, max_len), dtype=torch.bool, device=device)
    attn = torch.zeros((2 * n, 1, max_len, max_len), dtype=torch.bool, device=device)
    for i, p in enumerate(prompts):
        c_len, t_len = p.length, p.target_len
        ids[i, :, :c_len] = p.input_ids.to(device)
        audio_mask[i, p.audio_start : c_len] = True
        attn[i, :, :c_len, :c_len] = True
        ids[n + i, :, :t_len] = p.input_ids[:, c_len - t_len :].to(device)
        audio_mask[n + i, :t_len] = True
        attn[n + i, :, :t_len, :t_len] = True
        # Unconditional padding rows see themselves, so no softmax row is empty.
        pad = torch.arange(t_len, max_len, device=device)
        attn[n + i, :, pad, pad] = True

    tokens = [torch.full((1, num_cb, p.target_len), mask_id, dtype=torch.long, device=device) for p in prompts]
    layer_penalty = torch.arange(num_cb, device=device).view(1, -1, 1)
    num_steps = max(p.num_step for p in prompts)

    for step in range(num_steps):
        if all(step >= p.num_step or p.schedule[step] == 0 for p in prompts):
            continue  # nothing to reveal: the forward pass would change nothing
        logits = model(ids, audio_mask, attn).to(torch.float32)
        for i, p in enumerate(prompts):
            k = p.schedule[step] if step < p.num_step else 0
            if k <= 0:
                continue
            c_len, t_len = p.length, p.target_len
            pred, scores = _choose(logits[i : i + 1, :, c_len - t_len : c_len], logits[n + i : n + i + 1, :, :t_len], p, mask_id)
            scores = scores - layer_penalty * p.layer_penalty_factor
            if p.position_temperature > 0.0:
                scores = _gumbel(scores, p.position_temperature, p.generator)
            current = tokens[i]
            scores.masked_fill_(current != mask_id, -float("inf"))
            reveal = torch.topk(scores.flatten(), k).indices
            flat = current.flatten()
            flat[reveal] = pred.flatten()[reveal]
            tokens[i] = flat.view_as(current)
            ids[i, :, c_len - t_len : c_len] = tokens[i][0]
            ids[n + i, :, :t_len] = tokens[i][0]
        if on_step is not None:
            on_step(step + 1, num_steps)
    return [t[0] for t in tokens]
