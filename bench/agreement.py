"""Token agreement between our runtime and the reference generate() on the same GPU.

    PYTHONPATH=REFSITE:. python3 bench/agreement.py CHECKPOINT --dtype float32 [--items 24]

Deterministic settings (both temperatures 0), so neither side draws random numbers and any
difference is arithmetic: kernel choice and rounding. Items are auto voice, voice design and a
5 s clone prompt, run as one batch on each side (the reference pads; we pack). Prints and
returns the share of equal tokens, per item and overall. Bench only: it imports the reference.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import workloads

from sidecar.runtime.omnivoice import OmniVoice as Ours
from sidecar.runtime.options import RuntimeOptions
from sidecar.runtime.request import GenerationRequest, VoicePrompt

GREEDY = {"position_temperature": 0.0, "class_temperature": 0.0}
EAGER = "--eager" in sys.argv  # our side without CUDA graphs and torch.compile


def reference_tokens(
    checkpoint: str,
    device: str,
    dtype: torch.dtype,
    texts: list[str],
    instructs: list[str | None],
    clone: dict,
) -> tuple[list[np.ndarray], dict]:
    from omnivoice import OmniVoice as Reference  # bench only

    model = Reference.from_pretrained(checkpoint, device_map=device, dtype=dtype)
    captured: list[np.ndarray] = []
    original = model._decode_and_post_process

    def capture(tokens, rms, gen_config):  # type: ignore[no-untyped-def]
        captured.append(
            tokens.cpu().numpy()
            if isinstance(tokens, torch.Tensor)
            else np.concatenate([t.cpu().numpy() for t in tokens], axis=1)
        )
        return original(tokens, rms, gen_config)

    model._decode_and_post_process = capture
    wav = torch.tensor(clone["wav"], dtype=torch.float32).unsqueeze(0)
    prompt = model.create_voice_clone_prompt((wav, model.sampling_rate), ref_text=clone["text"])
    model.generate(text=texts, instruct=instructs, **GREEDY)
    model.generate(text=clone["texts"], voice_clone_prompt=prompt, **GREEDY)
    if clone.get("baseline"):
        # The reference against itself: the same items one at a time instead of in one batch.
        batched = list(captured)
        captured.clear()
        for t, i in zip(texts, instructs):
            model.generate(text=t, instruct=i, **GREEDY)
        for t in clone["texts"]:
            model.generate(text=t, voice_clone_prompt=prompt, **GREEDY)
        clone["self_agreement"] = float(
            np.mean([(a == b).mean() for a, b in zip(batched, captured) if a.shape == b.shape])
        )
        captured[:] = batched
    voice = {
        "tokens": prompt.ref_audio_tokens.cpu().numpy(),
        "ref_text": prompt.ref_text,
        "ref_rms": float(prompt.ref_rms),
    }
    del model
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return captured, voice


def our_tokens(  # noqa: PLR0913  a probe's one call from main: the inputs of one comparison
    checkpoint: str,
    device: str,
    dtype: str,
    texts: list[str],
    instructs: list[str | None],
    clone_texts: list[str],
    voice: dict,
    clone: dict,
) -> tuple[list[np.ndarray], float]:
    model = Ours.load(
        checkpoint,
        device=device,
        dtype=dtype,
        options=RuntimeOptions(cuda_graphs=not EAGER, compile=False if EAGER else None),
    )
    mine = model.encode_voice(np.asarray(clone["wav"], dtype=np.float32), 24000, clone["text"])
    prompt_agreement = (
        float((mine.tokens == voice["tokens"]).mean())
        if mine.tokens.shape == voice["tokens"].shape
        else 0.0
    )
    prompt = VoicePrompt(voice["tokens"].astype(np.int64), voice["ref_text"], voice["ref_rms"])
    requests = [
        GenerationRequest(text=t, instruct=i, return_tokens=True, **GREEDY)
        for t, i in zip(texts, instructs)
    ]
    requests += [
        GenerationRequest(text=t, voice=prompt, return_tokens=True, **GREEDY) for t in clone_texts
    ]
    return [np.concatenate(r.tokens, axis=1) for r in model.generate(requests)], prompt_agreement


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint")
    ap.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    ap.add_argument("--items", type=int, default=24)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument(
        "--eager", action="store_true", help="run our runtime without CUDA graphs or torch.compile"
    )
    ap.add_argument(
        "--baseline",
        action="store_true",
        help="also run the reference one item at a time and report its self-agreement",
    )
    args = ap.parse_args()
    if args.dtype == "float32":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    work = [r for r in workloads.mixed(400, seed=5) if r.words <= 60][: args.items]
    plain = [r for r in work if r.kind != "clone"]
    texts = [r.text for r in plain]
    instructs = [r.instruct for r in plain]
    clone_texts = [r.text for r in work if r.kind == "clone"] or [work[0].text]
    clone = {
        "wav": workloads.clone_reference(),
        "text": workloads.CLONE_REF_TEXT,
        "texts": clone_texts,
        "baseline": args.baseline,
    }
    ref, voice = reference_tokens(
        args.checkpoint, args.device, getattr(torch, args.dtype), texts, instructs, clone
    )
    ours, prompt_agreement = our_tokens(
        args.checkpoint, args.device, args.dtype, texts, instructs, clone_texts, voice, clone
    )
    per_item = []
    equal = total = 0
    for a, b in zip(ours, ref):
        if a.shape != b.shape:
            per_item.append({"shape": [list(a.shape), list(b.shape)]})
            total += b.size
            continue
        same = int((a == b).sum())
        per_item.append(round(same / b.size, 4))
        equal, total = equal + same, total + b.size
    result = {
        "dtype": args.dtype,
        "items": len(ref),
        "tokens": total,
        "agreement": round(equal / total, 5),
        "clone_prompt_agreement": round(prompt_agreement, 5),
        "per_item": per_item,
    }
    if "self_agreement" in clone:
        result["reference_batch_vs_single_agreement"] = round(clone["self_agreement"], 5)
    print(json.dumps(result), flush=True)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
