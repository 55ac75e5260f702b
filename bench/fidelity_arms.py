"""One checkpoint's fidelity measurement (`bench/fidelity.py`): the float32 reference's states,
then every arm on each of them (the reference in float32, its bf16 variants, our runtime in bf16
as the sidecar loads it), scored step by step, then the packing check; the checkpoint's part of
the result file."""

from __future__ import annotations

from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np
import torch
from fidelity_packing import packing
from fidelity_reference import DEFAULT, State, Variants
from fidelity_scores import Discord, Tally, batch_state, decide
from fidelity_states import STEPS, capture_states, prompts_match, ref_logits, reference

from sidecar.runtime.omnivoice import OmniVoice as Ours
from sidecar.runtime.options import RuntimeOptions

PACKING_STEP = 16


def measure(
    checkpoint: Path, device: str, count: int, options: RuntimeOptions, variant_names: list[str]
) -> dict[str, Any]:
    torch.backends.cuda.matmul.allow_tf32 = False  # the float32 reference is float32
    torch.backends.cudnn.allow_tf32 = False
    ref32 = reference(checkpoint, device, torch.float32)
    states, extra = capture_states(ref32, count)
    ref16 = reference(checkpoint, device, torch.bfloat16)
    variants = Variants(ref16, variant_names)
    ours = Ours.load(str(checkpoint), device=device, dtype="bfloat16", options=options)
    tallies = {step: {name: Tally() for name in ["ours", *variants.names]} for step in STEPS}
    discords = {step: Discord() for step in STEPS}
    top1_prob: list[float] = []
    kept: list[tuple[State, torch.Tensor, torch.Tensor]] = []  # at PACKING_STEP: (a), (b)
    prompts_equal = True
    for step in STEPS:
        for state, arms in variants.at_step([st for st in states if st.step == step]):
            ours_state = batch_state(ours, state.prompts())
            if step == 0:
                prompts_equal &= prompts_match(ours, state, extra["requests"][state.group])
            with torch.inference_mode():
                a = ref_logits(ref32, state)
                masked = (ours_state.tokens[:, :-1] == ours.mask_id).T
                ref = (a, *decide(ours_state, a, step))
                if step == 0:
                    s = a.shape[0] // 2
                    probs = torch.softmax(a[:s, :, : ours.mask_id], dim=-1)
                    top1_prob.append(float(probs.max(-1)[0].mean()))
                for name, x in chain([("ours", ours_state.forward())], arms):  # one at a time
                    revealed = tallies[step][name].add(
                        ref, (x, *decide(ours_state, x, step)), masked, ours.mask_id
                    )
                    if name == DEFAULT and step == PACKING_STEP:
                        kept.append((state, a, x))
                discords[step].add(tallies[step][DEFAULT], tallies[step]["ours"], revealed)
    with torch.inference_mode():
        pack = packing(ours, *map(list, zip(*kept)), extra["voice"])
    measured = [n for n in variants.names if n not in variants.skipped]
    steps = [
        {
            "step": k,
            "ref_bf16": tallies[k][DEFAULT].result(),
            "ours_bf16": tallies[k]["ours"].result(),
            "top1_paired": discords[k].result(),
            "variants": {n: tallies[k][n].result() for n in measured},
        }
        for k in STEPS
    ]
    pooled = Discord()
    for k in STEPS:
        pooled = pooled.merged(discords[k])
    hits = [sum(tallies[k][arm].top1_hits for k in STEPS) for arm in (DEFAULT, "ours")]
    eager_rounding = bool(ours.runner.options.compile)  # a compiled stack rounds as eager does
    reference_attention = ref16.llm.config._attn_implementation
    skipped = dict(variants.skipped)
    del ref32, ref16, ours, variants
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return {
        "steps": steps,
        "top1_all_steps": {
            "ref_bf16": hits[0] / pooled.revealed,
            "ours_bf16": hits[1] / pooled.revealed,
            "revealed": pooled.revealed,
            "paired": pooled.result(),
        },
        "packing": pack,
        "variants_measured": measured,
        "variants_skipped": skipped,
        "reference_attention": reference_attention,
        "eager_rounding": eager_rounding,
        "mean_top1_prob": float(np.mean(top1_prob)),
        "items": sum(st.rows for st in states if st.step == 0),
        "prompts_equal_to_ours": prompts_equal,
    }
