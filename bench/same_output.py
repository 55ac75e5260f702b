"""Does a change leave the runtime's output bit for bit as it was? Logits of one packed forward
at 1, 8 and 64 items (compiled, no graphs) and eight seeded whole generations (the production
path: graphs, compile, kernels), from whichever tree is first on the import path; then the two
saves compared.

    PYTHONPATH=/tmp/site:$PWD python3 bench/same_output.py CHECKPOINT new.pt
    (cd OLD_TREE && PYTHONPATH=/tmp/site:$PWD python3 $NEW/bench/same_output.py CHECKPOINT old.pt)
    python3 bench/same_output.py --compare old.pt new.pt     # "ALL EQUAL" or "DIFFERENT"

The audio goes through the codec's batched decode, whose shapes (and so its float rounding)
change with how it pads a batch: across a change to that, the `audio` rows differ by their
`max_abs_diff` (4e-5 to 6e-5 of a 0.5 peak on the CPU's tiny checkpoint, the decoder's ~1e-6
scaled by the loudness normalisation) while the logits and the joined requests' tokens stay
equal.

An old tree is any checkout (`git archive COMMIT sidecar | tar -x -C OLD_TREE`); trees from
before the sidecar was grouped by role (flat `sidecar/`) are read too. A GPU in bf16; set
DEV=cpu to try it on the CPU (float32, no compile).
"""

from __future__ import annotations

import json
import os
import sys
import time

import torch

DEV = os.environ.get("DEV", "cuda:0")
DTYPE = "bfloat16" if DEV.startswith("cuda") else "float32"
TEXT = (
    "The quiet harbour woke slowly as the fishing boats returned with the morning tide, "
    "gulls circling over the nets while the old lighthouse keeper counted every hull that "
    "passed the breakwater and wrote each name into his weathered book before breakfast."
)


def compare(old_path: str, new_path: str) -> int:
    old, new = torch.load(old_path), torch.load(new_path)
    rows = {}
    for key, a in old.items():
        b = new[key]
        same_shape = a.shape == b.shape
        rows[key] = {
            "shape": list(a.shape),
            "equal": bool(same_shape and torch.equal(a, b)),
            "max_abs_diff": float((a.float() - b.float()).abs().max()) if same_shape else None,
        }
    print(json.dumps(rows, indent=1))
    equal = all(row["equal"] for row in rows.values())
    print("ALL EQUAL" if equal else "DIFFERENT")
    return 0 if equal else 1


def save(checkpoint: str, out: str) -> int:
    try:  # the sidecar grouped by role
        from sidecar.runtime.generate import BatchState
        from sidecar.runtime.omnivoice import OmniVoice
        from sidecar.runtime.options import RuntimeOptions
        from sidecar.runtime.request import GenerationRequest

        def load(**switches: bool) -> OmniVoice:
            return OmniVoice.load(checkpoint, DEV, DTYPE, options=RuntimeOptions(**switches))
    except ImportError:  # a flat sidecar/, before the regroup
        from sidecar.generate import BatchState  # type: ignore[no-redef]
        from sidecar.request import GenerationRequest  # type: ignore[no-redef]
        from sidecar.runtime import OmniVoice  # type: ignore[no-redef]

        def load(**switches: bool) -> OmniVoice:
            return OmniVoice.load(checkpoint, DEV, DTYPE, **switches)

    words = TEXT.split()

    def requests(n: int) -> list[GenerationRequest]:
        return [
            GenerationRequest(text=" ".join(words[: 6 + (i * 7) % len(words)]), seed=i)
            for i in range(n)
        ]

    saved: dict[str, torch.Tensor] = {}
    start = time.time()
    model = load(cuda_graphs=False, compile=DEV.startswith("cuda"))
    prepare = model.prompter.prepare if hasattr(model, "prompter") else model._normalise
    make_prompt = model.prompter.prompt if hasattr(model, "prompter") else model._prompt
    for n in (1, 8, 64):
        items = [prepare(r) for r in requests(n)]
        prompts = [make_prompt(it, it.text, it.target_len, None, None) for it in items]
        with torch.inference_mode():
            state = BatchState(model.model, prompts, model.runner)
            saved[f"logits{n}"] = state.forward().float().cpu()
    print(f"logits: {time.time() - start:.1f} s", flush=True)
    del model
    torch.cuda.empty_cache()
    model = load()
    with torch.inference_mode():
        for i, result in enumerate(model.generate(requests(8))):
            saved[f"audio{i}"] = torch.as_tensor(result.audio).clone()
    print(f"generations: {time.time() - start:.1f} s", flush=True)
    if hasattr(model, "stepper"):
        joined_equal(model, requests(8), saved)
    torch.save(saved, out)
    return 0


def joined_equal(model: object, requests: list, saved: dict[str, torch.Tensor]) -> None:
    """Two of the eight requests join the other six at their step 7 as interactive ones, with
    the bulk ones paused (`step_tokens` 1) or partly running (4096). Each request's tokens must
    equal its tokens in one batch of all eight and alone ("JOINED EQUAL"); the audio, decoded
    in other codec batches than `audio{i}`'s (the batched decode's float rounding, ~1e-6), is
    reported apart."""
    from sidecar.runtime.stepper import run_to_end
    from sidecar.shared.tiers import Tier

    def tokens(denoised: object) -> torch.Tensor:
        return torch.cat([t.cpu() for t in denoised.tokens], dim=-1)  # type: ignore[attr-defined]

    together = [tokens(d) for d in model.denoise(requests)]  # type: ignore[attr-defined]
    alone = [tokens(model.denoise([r])[0]) for r in requests]  # type: ignore[attr-defined]
    invariant = all(torch.equal(a, b) for a, b in zip(together, alone))
    for step_tokens in (1, 4096):
        stepper = model.stepper(step_tokens)  # type: ignore[attr-defined]
        stepper.add("bulk", requests[:6])
        finished = []
        for _ in range(7):
            finished += stepper.step()
        stepper.add("urgent", requests[6:], tier=Tier.INTERACTIVE)
        finished += run_to_end(stepper)
        got = {
            (0 if key == "bulk" else 6) + i: d
            for key, group in finished
            for i, d in enumerate(group)
        }
        equal = all(torch.equal(tokens(got[i]), together[i]) for i in range(8)) and all(
            torch.equal(tokens(got[i]), alone[i]) for i in range(8)
        )
        with torch.inference_mode():
            audio = model.decode([got[i] for i in range(8)])  # type: ignore[attr-defined]
        diff = max(
            float((torch.as_tensor(r.audio) - saved[f"audio{i}"]).abs().max())
            for i, r in enumerate(audio)
        )
        print(
            f"alone = in one batch: {invariant}; joined at step 7, step_tokens {step_tokens}: "
            f"finished {[key for key, _ in finished]}, {stepper.builds} builds, audio max "
            f"|diff| {diff:.2e}: {'JOINED EQUAL' if equal else 'JOINED DIFFERENT'}",
            flush=True,
        )


if __name__ == "__main__":
    if sys.argv[1] == "--compare":
        raise SystemExit(compare(sys.argv[2], sys.argv[3]))
    raise SystemExit(save(sys.argv[1], sys.argv[2]))
