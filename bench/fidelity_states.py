"""The float32 reference's run in the fidelity measurement (`bench/fidelity.py`): the work
items, the reference loaded as it is published, the partially revealed states it feeds its network
at the measured steps, its logits for a kept state, and whether our own prompt builder makes the
same prompts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
import workloads
from fidelity_reference import GREEDY, NUM_STEP, State

from sidecar.runtime.omnivoice import OmniVoice as Ours
from sidecar.runtime.request import GenerationRequest, VoicePrompt

STEPS = (0, 8, 16, 24, 31)
GROUP = 32  # items a reference generate() call: both rows fit one of our packed batches


def work(count: int) -> tuple[list[str], list[str | None], list[str]]:
    """agreement.py's items (its first `count`): auto and design texts, then the clone texts."""
    items = [r for r in workloads.mixed(400, seed=5) if r.words <= 60][:count]
    plain = [r for r in items if r.kind != "clone"]
    # No clone item among the first few (a dry run): the shortest text, which no checkpoint's
    # duration estimate chunks.
    clone = [r.text for r in items if r.kind == "clone"] or [min(items, key=lambda r: r.words).text]
    return [r.text for r in plain], [r.instruct for r in plain], clone


def reference(checkpoint: Path, device: str, dtype: torch.dtype) -> Any:
    from omnivoice import OmniVoice as Reference  # bench only

    placed = {} if device == "cpu" else {"device_map": device}  # device_map needs accelerate
    return Reference.from_pretrained(str(checkpoint), dtype=dtype, **placed)


def capture_states(model: Any, count: int) -> tuple[list[State], dict[str, Any]]:
    """Run the float32 reference on `count` work items; keep the states at STEPS, and the clone
    prompt it made (our side uses the same codes)."""
    texts, instructs, clone_texts = work(count)
    states: list[State] = []
    calls = [0]
    forward = model.forward

    def keep(
        input_ids: torch.Tensor, audio_mask: torch.Tensor, attention_mask: torch.Tensor, **kw: Any
    ) -> Any:
        n, calls[0] = calls[0], calls[0] + 1
        if n % NUM_STEP in STEPS:
            states.append(
                State(
                    n // NUM_STEP,
                    n % NUM_STEP,
                    input_ids.clone(),
                    audio_mask.clone(),
                    attention_mask.clone(),
                )
            )
        return forward(
            input_ids=input_ids, audio_mask=audio_mask, attention_mask=attention_mask, **kw
        )

    model.forward = keep
    wav = torch.tensor(workloads.clone_reference(), dtype=torch.float32).unsqueeze(0)
    prompt = model.create_voice_clone_prompt(
        (wav, model.sampling_rate), ref_text=workloads.CLONE_REF_TEXT
    )
    voice = VoicePrompt(
        prompt.ref_audio_tokens.cpu().numpy().astype(np.int64),
        prompt.ref_text,
        float(prompt.ref_rms),
    )
    requests = []  # one list a generate() call (a state's group)
    for at in range(0, len(texts), GROUP):
        part, said = texts[at : at + GROUP], instructs[at : at + GROUP]
        model.generate(text=part, instruct=said, num_step=NUM_STEP, **GREEDY)
        requests.append(
            [GenerationRequest(text=t, instruct=i, **GREEDY) for t, i in zip(part, said)]
        )
    for at in range(0, len(clone_texts), GROUP):
        part = clone_texts[at : at + GROUP]
        model.generate(text=part, voice_clone_prompt=prompt, num_step=NUM_STEP, **GREEDY)
        requests.append([GenerationRequest(text=t, voice=voice, **GREEDY) for t in part])
    model.forward = forward
    assert calls[0] == len(requests) * NUM_STEP, (
        "an item was chunked: states no longer map to steps"
    )
    return states, {"voice": voice, "requests": requests}


def ref_logits(model: Any, state: State) -> torch.Tensor:
    with torch.inference_mode():
        out = model(
            input_ids=state.input_ids,
            audio_mask=state.audio_mask,
            attention_mask=state.attention_mask,
        ).logits
    return state.to_targets(out)


def prompts_match(ours: Ours, state: State, requests: list[GenerationRequest]) -> bool:
    """Every arm is fed the reference's state; this checks that our own prompt builder would have
    made the same tokens. The length estimate sums floats with sum(), which Python 3.12
    compensates and 3.11 does not: on 3.11 (a CPU dry run) one item can come out a frame shorter
    in the reference, so expect false there."""
    built = [
        ours.prompter.chunk_prompt(it, [it.text], 0, None)
        for it in map(ours.prompter.prepare, requests)
    ]
    return all(torch.equal(p.input_ids, q.input_ids) for p, q in zip(state.prompts(), built))
