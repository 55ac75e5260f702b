"""sidecar/runtime/kernels/scoring.py: a step's scoring as one Triton kernel, against the eager scoring.

There is no GPU here: the kernel runs in Triton's interpreter (TRITON_INTERPRET=1), which
executes the same kernel code on the CPU with NumPy. The variable has to be set before Triton
decorates the kernel, so each check runs in an interpreter process of its own. What only a GPU
shows (the speed, and the share of equal tokens under its exp, log and summation order) is
`bench/profile_step.py`'s to measure.
"""

from __future__ import annotations

from pathlib import Path

from tests.helpers.triton_interpreter import interpreted

# The eager scoring, `BatchState.log_probs` then argmax and max, is what the kernel must give.
CASES = r"""
import json, types, torch
from sidecar.runtime.kernels import scoring
from sidecar.runtime.generate import BatchState

torch.manual_seed(0)
S, C, V, MASK = 3, 8, 1025, 1024  # the real vocabulary: a block of 2048 lanes, 1023 outside


def compare(logits, guidance):
    g = [float(x) for x in guidance]
    state = types.SimpleNamespace(any_guided=any(g), all_guided=all(g), guidance=guidance,
                                  mask_id=MASK)
    log_probs = BatchState.log_probs(state, logits)
    tokens, confidence = scoring.choose(logits, guidance, MASK, any(g))
    return {
        "tokens_equal": bool(torch.equal(tokens, log_probs.argmax(-1))),
        "confidence_diff": float((confidence - log_probs.max(-1)[0]).abs().max()),
        "mask_chosen": bool((tokens == MASK).any()),
        "tokens": tokens.tolist(),
        "shapes": [list(tokens.shape), list(confidence.shape)],
        "dtypes": [str(tokens.dtype), str(confidence.dtype)],
    }


logits = (torch.randn(2 * S, C, V) * 3).to(torch.bfloat16)
out = {
    "guided": compare(logits, torch.tensor([2.0, 2.0, 2.0])),
    "unguided": compare(logits, torch.tensor([0.0, 0.0, 0.0])),
    "mixed": compare(logits, torch.tensor([2.0, 0.0, 1.5])),
}
masked = logits.clone()
masked[..., MASK] = 40.0  # the mask token has the largest logit everywhere
out["mask_largest"] = compare(masked, torch.tensor([2.0, 0.0, 1.5]))
tied = logits.clone()
tied[..., 9] = tied[..., 5] = 30.0  # two equal maxima: the first is taken, as argmax takes it
tied[S:] = tied[:S]  # the same halves: guidance then keeps the tie
out["tied"] = compare(tied, torch.tensor([2.0, 0.0, 1.5]))
wide = (torch.randn(2 * S, C, V + 7) * 3).to(torch.bfloat16)
out["strided"] = compare(wide[..., :V], torch.tensor([2.0, 0.0, 1.5]))  # rows V + 7 apart
empty = scoring.choose(torch.zeros(0, C, V, dtype=torch.bfloat16), torch.zeros(0), MASK, True)
out["empty"] = [list(t.shape) for t in empty]
print(json.dumps(out))
"""


def test_the_kernel_scores_as_the_eager_scoring_does() -> None:
    out = interpreted(CASES)
    for name in ("guided", "unguided", "mixed", "mask_largest", "tied", "strided"):
        case = out[name]
        assert case["tokens_equal"], name
        assert case["confidence_diff"] < 1e-5, (name, case["confidence_diff"])
        assert not case["mask_chosen"], name
        assert case["shapes"] == [[3, 8], [3, 8]], name
        assert case["dtypes"] == ["torch.int64", "torch.float32"], name
    assert all(t == 5 for row in out["tied"]["tokens"] for t in row)
    # Guidance changes the choice somewhere, so "guided" did read the unconditional half.
    assert out["guided"]["tokens"] != out["unguided"]["tokens"]
    assert out["empty"] == [[0, 8], [0, 8]]


# A whole batch through `generate_tokens` on the tiny checkpoint: the runner asks for the fused
# scoring (forced on: the runner allows it on a GPU only), so `BatchState.choose` takes the
# kernel at every step. Class sampling keeps the eager path, so its tokens must be the eager ones
# bit for bit; without it, the kernel's must be too (the tiny model's logits have no near ties).
GENERATE = r"""
import json, sys, torch
from sidecar.runtime.generate import generate_tokens
from sidecar.runtime.omnivoice import OmniVoice
from sidecar.runtime.request import GenerationRequest

model = OmniVoice.load(sys.argv[1])
requests = [
    GenerationRequest(text="The quiet harbour at dawn.", num_step=4, seed=1),
    GenerationRequest(text="No guidance here.", num_step=4, seed=2, guidance_scale=0.0),
    GenerationRequest(text="Sampled classes.", num_step=4, seed=3, class_temperature=0.7),
]


def tokens(batch, fused):
    model.runner.fused_scoring = fused
    items = [model.prompter.prepare(r) for r in batch]
    prompts = [model.prompter.prompt(it, it.text, it.target_len, None, None) for it in items]
    return generate_tokens(model.model, prompts, runner=model.runner)


plain = tokens(requests[:2], False)
fused = tokens(requests[:2], True)
sampled_plain = tokens(requests, False)
sampled_fused = tokens(requests, True)
print(json.dumps({
    "fused_equal": all(torch.equal(a, b) for a, b in zip(plain, fused)),
    "sampled_equal": all(torch.equal(a, b) for a, b in zip(sampled_plain, sampled_fused)),
    "lengths": [t.shape[1] for t in fused],
}))
"""


def test_a_batch_scored_by_the_kernel_gets_the_eager_tokens(checkpoint_dir: Path) -> None:
    out = interpreted(GENERATE, str(checkpoint_dir))
    assert out["fused_equal"] and out["sampled_equal"], out
    assert all(n > 0 for n in out["lengths"])
