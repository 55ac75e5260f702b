"""The reference's side of the fidelity run (bench/fidelity_reference.py) around a stand-in
network: one attention layer through PyTorch's SDPA, in float64, in place of the reference's
model (omnivoice 0.2.1, which the tests do not install). What is checked is the plumbing that
makes the band's variants: batches padded as the reference pads them, items moved between
batches and back, a variant that cannot run skipped with its reason."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import torch

from bench import fidelity_reference as ref

PAD = 1024
CODEBOOKS = 3
VOCAB = 5


class Network(torch.nn.Module):
    """Logits that depend on every position a row attends to, and on where it sits in its row."""

    config = SimpleNamespace(audio_mask_id=PAD)

    def forward(self, input_ids: Any, audio_mask: Any, attention_mask: Any) -> Any:
        length = input_ids.shape[-1]
        x = input_ids.double() / 100 + audio_mask[:, None, :].double()
        x = (x + torch.arange(length, dtype=torch.float64) / 10).transpose(1, 2)[:, None]
        h = torch.nn.functional.scaled_dot_product_attention(x, x, x, attn_mask=attention_mask)
        h = h[:, 0].transpose(1, 2)  # [2B, C, L]
        return SimpleNamespace(logits=torch.sin(h[..., None] * torch.arange(1, VOCAB + 1)))


class Broken(Network):
    def forward(self, input_ids: Any, audio_mask: Any, attention_mask: Any) -> Any:
        raise RuntimeError("no kernel for this")


def item(prompt: int, target: int, seed: int) -> ref.Item:
    """An item whose cond row is `prompt` long and ends in its `target` audio frames."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, PAD, (CODEBOOKS, prompt), generator=gen)
    audio = torch.zeros(prompt, dtype=torch.bool)
    audio[max(0, prompt - target - 2) :] = True  # a clone prompt's frames, then the target's
    return ref.Item(ids, audio, ids[:, -target:], audio[-target:])


def states() -> list[ref.State]:
    sizes = [(9, 4), (14, 6), (7, 5), (12, 3), (10, 8)]
    items = [item(p, t, seed) for seed, (p, t) in enumerate(sizes)]
    return [ref.pad(items[:3], PAD), ref.pad(items[3:], PAD)]


def test_a_batch_is_padded_as_the_reference_pads_it() -> None:
    a, b = item(6, 2, 0), item(4, 3, 1)
    state = ref.pad([a, b], PAD)
    assert state.input_ids.shape == (4, CODEBOOKS, 6)
    assert state.layout() == [(6, 2, 2), (4, 3, 0)]  # (c_len, target_len, audio_start)
    # cond rows: the prompt, padded on the right; the padding attends to nothing
    assert torch.equal(state.input_ids[1, :, :4], b.cond_ids)
    assert (state.input_ids[1, :, 4:] == PAD).all()
    assert not state.attention_mask[1, 0, 4:].any() and not state.attention_mask[1, 0, :, 4:].any()
    # uncond rows: the target alone; each padding position attends to itself only
    assert torch.equal(state.input_ids[3, :, :3], b.uncond_ids)
    assert torch.equal(state.attention_mask[3, 0, 3:, 3:], torch.eye(3, dtype=torch.bool))
    assert state.attention_mask[3, 0, :3, :3].all()
    assert not state.audio_mask[3, 3:].any() and state.audio_mask[3, :3].all()


def test_items_batched_otherwise_come_back_in_their_own_states_layout() -> None:
    network, kept = Network(), states()
    own = [s.to_targets(run(network, s)) for s in kept]
    for seed, size in ((1, 2), (2, 4)):
        moved = ref.regrouped(lambda s: run(network, s), kept, seed, size, PAD)
        assert [m.shape for m in moved] == [o.shape for o in own]
        for m, o in zip(moved, own):
            torch.testing.assert_close(m, o, rtol=0, atol=1e-6)


def run(network: torch.nn.Module, state: ref.State) -> torch.Tensor:
    return network(
        input_ids=state.input_ids,
        audio_mask=state.audio_mask,
        attention_mask=state.attention_mask,
    ).logits


def test_a_variant_that_cannot_run_here_is_skipped_with_its_reason() -> None:
    """cuDNN's SDPA has no kernel for CPU tensors: skipped, and the run goes on without it."""
    variants = ref.Variants(Network(), ["sdpa_cudnn", "sdpa_math", "batch_seed1"])
    assert variants.names == ["sdpa", "sdpa_math", "sdpa_cudnn", "batch_seed1"]
    seen = [[name for name, _ in arms] for _, arms in variants.at_step(states())]
    assert seen == [["sdpa", "sdpa_math", "batch_seed1"]] * 2
    assert list(variants.skipped) == ["sdpa_cudnn"]
    assert variants.skipped["sdpa_cudnn"].startswith("RuntimeError")


def test_the_reference_as_it_runs_failing_ends_the_run() -> None:
    variants = ref.Variants(Broken(), ["eager"])
    with pytest.raises(RuntimeError, match="no kernel"):
        for _, arms in variants.at_step(states()):
            list(arms)


def test_a_variant_whose_logits_are_not_finite_is_skipped() -> None:
    """A kernel that writes NaN fails; left in, a NaN would pass every comparison of the gate."""
    variants = ref.Variants(Network(), ["batch_seed1"])
    good = torch.zeros(2, 3)
    assert variants._guard("batch_seed1", lambda: [good, good.clone()]) is not None
    assert variants._guard("batch_seed1", lambda: [good, good / 0 * 0]) is None
    assert variants.skipped == {"batch_seed1": "ValueError: logits not finite"}
    with pytest.raises(ValueError, match="not finite"):
        variants._guard(ref.DEFAULT, lambda: good / 0)


def test_unknown_variants_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown variants"):
        ref.Variants(Network(), ["sdpa", "fp8"])


def test_the_additive_mask_attends_where_the_boolean_mask_does() -> None:
    mask = torch.tensor([[True, False, True], [False, False, False]])
    scores = torch.randn(2, 3, dtype=torch.float32)
    weights = torch.softmax(scores + ref.additive(mask, torch.float32), dim=-1)
    assert (weights[0, 1] == 0).all() and weights[0].sum() == pytest.approx(1)
    assert torch.isfinite(weights[1]).all()  # a row attending nowhere stays finite
