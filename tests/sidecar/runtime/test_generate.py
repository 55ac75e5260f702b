"""The batched scoring and unmasking (sidecar/runtime/generate.py) against a plain per-item version of
the reference algorithm, on random logits, with every setting differing between items."""

from __future__ import annotations

import math

import pytest
import torch

from sidecar.runtime.config import ModelConfig
from sidecar.runtime.generate import NOISE_STEPS, BatchState, Prompt
from sidecar.runtime.model import OmniVoiceModel
from sidecar.runtime.noise import COUNTER_STRIDE, NOISE_CLASS, NOISE_POSITION, gumbel, uniform_noise

MASK = 1024
CFG = ModelConfig(
    num_codebooks=8,
    audio_vocab_size=1025,
    audio_mask_id=MASK,
    hidden_size=16,
    intermediate_size=32,
    num_layers=1,
    num_heads=2,
    num_kv_heads=1,
    head_dim=8,
    vocab_size=300,
    rms_norm_eps=1e-6,
    rope_theta=1e6,
)


def make_prompt(t_len: int, text_len: int, num_step: int = 4, **settings: float) -> Prompt:
    ids = torch.cat(
        [torch.randint(0, 300, (1, text_len)).repeat(8, 1), torch.full((8, t_len), MASK)], dim=1
    )
    return Prompt(ids, audio_start=text_len, target_len=t_len, num_step=num_step, **settings)


def per_item_step(
    p: Prompt, cond: torch.Tensor, uncond: torch.Tensor, current: torch.Tensor, step: int
) -> torch.Tensor:
    """One step of the reference for one item ([C, T, V] logits, [C, T] tokens), with this
    project's noise source in place of torch.rand."""
    seed32 = torch.tensor((p.seed ^ (p.seed >> 32)) & 0xFFFFFFFF)
    lc = torch.log_softmax(cond, -1)
    if p.guidance_scale != 0:
        lp = torch.log_softmax(lc + p.guidance_scale * (lc - torch.log_softmax(uncond, -1)), -1)
    else:
        lp = lc
    lp[..., MASK] = -math.inf
    layer = torch.arange(8).view(-1, 1)
    t = torch.arange(cond.shape[1]).view(1, -1)
    if p.class_temperature > 0:
        values, classes = lp.topk(math.ceil(0.1 * 1025), -1)
        u = uniform_noise(
            seed32, step, NOISE_CLASS, (layer * COUNTER_STRIDE + t).unsqueeze(-1), classes
        )
        pred = classes.gather(
            -1, (values / p.class_temperature + gumbel(u)).argmax(-1, keepdim=True)
        ).squeeze(-1)
    else:
        pred = lp.argmax(-1)
    scores = lp.max(-1)[0] - layer * p.layer_penalty_factor
    if p.position_temperature > 0:
        scores = scores / p.position_temperature + gumbel(
            uniform_noise(seed32, step, NOISE_POSITION, layer * COUNTER_STRIDE + t)
        )
    scores = scores.masked_fill(current != MASK, -math.inf)
    k = p.schedule[step]
    out = current.flatten().clone()
    if k > 0:
        idx = torch.topk(scores.flatten(), k).indices
        out[idx] = pred.flatten()[idx]
    return out.view_as(current)


@pytest.mark.parametrize("seed,num_step", [(0, 4), (1, 4), (2, 4), (3, 2 * NOISE_STEPS + 3)])
def test_batched_steps_equal_the_per_item_algorithm(seed: int, num_step: int) -> None:
    """(The last case runs past two blocks of position noise made ahead, see NOISE_STEPS.)"""
    torch.manual_seed(seed)
    model = OmniVoiceModel(CFG).eval()
    prompts = [
        make_prompt(
            7,
            5,
            num_step,
            guidance_scale=2.0,
            position_temperature=5.0,
            class_temperature=0.0,
            seed=11,
        ),
        make_prompt(
            3,
            9,
            num_step,
            guidance_scale=0.0,
            position_temperature=0.0,
            class_temperature=0.0,
            seed=12,
        ),
        make_prompt(
            12,
            4,
            num_step,
            guidance_scale=1.5,
            position_temperature=2.0,
            class_temperature=0.8,
            layer_penalty_factor=3.0,
            seed=2**40 + 5,
        ),
    ]
    state = BatchState(model, prompts)
    expected = [torch.full((8, p.target_len), MASK) for p in prompts]
    off = state.packed.target_offsets
    for step in range(num_step):
        if max(state.k[step]) == 0:  # as generate_tokens: such a step changes nothing
            continue
        logits = torch.randn(2 * off[-1], 8, 1025) * 3
        tokens, confidence = state.choose(logits.clone(), step)
        state.reveal(tokens, confidence, step)
        for i, p in enumerate(prompts):
            cond = logits[off[i] : off[i + 1]].permute(1, 0, 2)
            uncond = logits[off[-1] + off[i] : off[-1] + off[i + 1]].permute(1, 0, 2)
            expected[i] = per_item_step(p, cond, uncond, expected[i], step)
        for i, got in enumerate(state.result()):
            assert torch.equal(got, expected[i]), f"item {i} differs at step {step}"
        # The inputs of both rows follow the token state.
        new = state.tokens[:, :-1]
        assert torch.equal(state.input_ids[:, state.cond_cols], new)
        assert torch.equal(state.input_ids[:, state.uncond_cols], new)
    assert all((t != MASK).all() for t in state.result())  # the last step reveals everything


def test_position_noise_made_ahead_is_each_steps_own() -> None:
    """BatchState makes the position noise NOISE_STEPS steps at a time; each step's slice is bit
    for bit the noise of that step alone, in any order of steps."""
    prompts = [make_prompt(9, 4, 3 * NOISE_STEPS, seed=s) for s in (7, 2**40 + 1, 123)]
    state = BatchState(OmniVoiceModel(CFG).eval(), prompts)
    for step in (0, 5, NOISE_STEPS, 2 * NOISE_STEPS + 1, 3, 3 * NOISE_STEPS - 1):
        alone = uniform_noise(
            state.seed32.view(-1, 1, 1), step, NOISE_POSITION, state.position_counter
        )
        assert torch.equal(state.position_gumbel(step), gumbel(alone)), step


def test_noise_is_uniform_and_a_function_of_its_inputs() -> None:
    seed = torch.tensor([[5]])
    counters = torch.arange(200_000).view(1, -1)
    u = uniform_noise(seed, 3, NOISE_POSITION, counters)
    assert u.dtype == torch.float32 and float(u.min()) >= 0 and float(u.max()) < 1
    assert abs(float(u.mean()) - 0.5) < 0.005 and abs(float(u.var()) - 1 / 12) < 0.002
    assert torch.equal(u, uniform_noise(seed, 3, NOISE_POSITION, counters))
    for other in (
        uniform_noise(seed + 1, 3, NOISE_POSITION, counters),
        uniform_noise(seed, 4, NOISE_POSITION, counters),
        uniform_noise(seed, 3, NOISE_CLASS, counters),
    ):
        assert float((other == u).float().mean()) < 0.001
