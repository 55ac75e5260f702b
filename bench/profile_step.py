"""Where a batch's time goes: per denoising step the forward, scoring (choose) and reveal; per
batch the decode (codec and post-processing), for batches of ~8 s auto-voice items. The forward
is the runtime's, to bf16 logits (`forward_ms`; until 2026-12-01 it included a float32 upcast
that the eager scoring makes itself, ~0.8 ms at 64 items). Also:
- a whole step's three parts back to back (`step_ms`: less than their sum where the host
  queues the next launches while the GPU works);
- on a GPU, whether a step runs free of host-device synchronisations (`step_free_of_syncs`),
  and whether a whole batch does, from its requests to its last step (`batch_free_of_syncs`);
  and where the batch's bucket has a graph per attention cap, whether they agree bit for bit
  and each one's replay time;
- on a GPU, the scoring as one Triton kernel (sidecar/runtime/kernels/scoring.py) against the eager scoring on
  the same logits: `choose_fused_ms`, `choice_tokens_equal` (the share of equal tokens; a
  float32 mean, which a GPU can round to 0.99999994 when all are equal) and `choice_tokens_unequal`,
  `choice_confidence_max_diff`, and a whole step with it (`step_fused_ms`,
  `step_fused_free_of_syncs`).

    python bench/profile_step.py CHECKPOINT --device cuda:0 --dtype bfloat16 --batch 1 8 32 64 --out profile.json

`--save-logits DIR` keeps each batch's logits (DIR/logits-B.pt), so that two settings of the
compiler can be compared bit for bit with `bench/stack_check.py --compare`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from runtime_speed import EIGHT_SECONDS

from sidecar.runtime.generate import BatchState, useful_flops
from sidecar.runtime.omnivoice import Denoised, OmniVoice
from sidecar.runtime.options import RuntimeOptions
from sidecar.runtime.request import GenerationRequest

TEXT = EIGHT_SECONDS


def timeit(fn, sync, repeats: int = 20) -> float:
    fn()
    sync()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    sync()
    return (time.perf_counter() - start) / repeats


def whole_step(state: BatchState) -> None:
    """One denoising step as the runtime runs it: forward, choose, reveal."""
    state.reveal(*state.choose(state.logits(), 0), 0)


def fused_scoring(state: BatchState, logits: torch.Tensor, sync) -> dict:
    """The step's scoring as one Triton kernel (sidecar/runtime/kernels/scoring.py) against the eager scoring on
    the same logits: its time, the share of equal tokens, the largest confidence difference, and
    a whole step with it (its time, and whether it stays free of synchronisations)."""
    if state.any_class_sampling:
        return {}
    eager_tokens, eager_conf = state.choose(logits, 0)
    state.fused_scoring = True
    try:
        choose = timeit(lambda: state.choose(logits, 0), sync)
        tokens, conf = state.choose(logits, 0)
        step = timeit(lambda: whole_step(state), sync)
        free = step_free_of_syncs(state)
    finally:
        state.fused_scoring = False
    return {
        "choose_fused_ms": round(choose * 1e3, 3),
        "choice_tokens_equal": float((tokens == eager_tokens).float().mean()),
        "choice_tokens_unequal": int((tokens != eager_tokens).sum()),  # exact, unlike the mean
        "choice_confidence_max_diff": float((conf - eager_conf).abs().max()),
        "step_fused_ms": round(step * 1e3, 2),
        "step_fused_free_of_syncs": free,
    }


def free_of_syncs(what: str, run) -> bool:
    """Whether `run()` queues its work without making the host wait for the GPU (torch's sync
    debug mode set to error around it); a synchronisation found is printed."""
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        run()
        return True
    except RuntimeError as exc:
        print(f"{what} synchronises: {exc}", file=sys.stderr)
        return False
    finally:
        torch.cuda.set_sync_debug_mode("default")
        torch.cuda.synchronize()


def step_free_of_syncs(state: BatchState) -> bool:
    """Whether one whole denoising step (forward, choose, reveal) runs without making the host
    wait for the GPU, so that the next step's launches queue up behind it."""
    return free_of_syncs("a step", lambda: whole_step(state))


def batch_free_of_syncs(model: OmniVoice, size: int) -> bool:
    """Whether a whole batch, from requests to its last step queued (`OmniVoice.denoise`: the
    prompts, the uploads, every step, the batch's end), runs without making the host wait for
    the GPU, so that the sidecar prepares the next batch while the device finishes this one."""
    requests = [GenerationRequest(text=TEXT, seed=i) for i in range(size)]
    return free_of_syncs("a batch", lambda: model.denoise(requests))


def attention_caps(model: OmniVoice, state: BatchState, sync) -> dict[str, object]:
    """The batch's bucket replayed from each of its graphs (one per attention cap): whether they
    give the same hidden states bit for bit, and each one's time."""
    runner, packed = model.runner, state.packed
    found = runner.bucket_for(packed.num_tokens, len(packed.segment_lens), packed.max_seqlen)
    if found is None or len(found[0].graphs) < 2:
        return {}
    bucket = found[0]
    runner.stage(
        bucket,
        state.input_ids,
        state.audio_mask,
        state.positions,
        state.cu_seqlens,
        state.head_index,
    )
    hidden, times = {}, {}
    for cap, graph in sorted(bucket.graphs.items()):
        times[f"replay_ms_cap_{cap}"] = round(timeit(graph.replay, sync) * 1e3, 2)
        graph.replay()
        sync()
        hidden[cap] = runner.hidden_out[: bucket.num_tokens].clone()
    first = next(iter(hidden.values()))
    return {"caps_bit_equal": all(torch.equal(first, h) for h in hidden.values()), **times}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8, 32, 64])
    ap.add_argument(
        "--compile",
        choices=("auto", "on", "off"),
        default="auto",
        help="torch.compile the layer stack before graph capture",
    )
    ap.add_argument(
        "--no-graphs", action="store_true", help="eager forward passes (no CUDA graphs)"
    )
    ap.add_argument(
        "--buckets",
        type=int,
        nargs="+",
        help="capture graphs for these token counts only (default: all of the runner's); they "
        "must include the buckets the batches land in (graph_misses says if not)",
    )
    ap.add_argument("--out", type=Path)
    ap.add_argument("--save-logits", type=Path, metavar="DIR")
    args = ap.parse_args()
    model = OmniVoice.load(
        args.checkpoint,
        device=args.device,
        dtype=args.dtype,
        options=RuntimeOptions(
            cuda_graphs=not args.no_graphs,
            compile={"auto": None, "on": True, "off": False}[args.compile],
            graphs_at_load=None,  # every graph before the timed steps
            **({"buckets": tuple(args.buckets)} if args.buckets else {}),
        ),
    )
    # The eager scoring is the baseline; fused_scoring() times the kernel.
    model.runner.fused_scoring = False
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    out = []
    for b in args.batch:
        items = [model.prompter.prepare(GenerationRequest(text=TEXT, seed=i)) for i in range(b)]
        prompts = [model.prompter.prompt(it, it.text, it.target_len, None, None) for it in items]
        with torch.inference_mode():
            state = BatchState(model.model, prompts, model.runner)
            fwd = timeit(state.logits, sync)  # bf16, as the runtime's step reads them
            logits = state.logits()
            if args.save_logits:
                args.save_logits.mkdir(parents=True, exist_ok=True)
                torch.save(logits.float().cpu(), args.save_logits / f"logits-{b}.pt")
            choose = timeit(lambda state=state, logits=logits: state.choose(logits, 0), sync)
            tokens, conf = state.choose(logits, 0)
            reveal = timeit(
                lambda state=state, tokens=tokens, conf=conf: state.reveal(tokens, conf, 0), sync
            )
            step = timeit(lambda state=state: whole_step(state), sync)
            # Random codes of each item's length: decoding costs the same whatever they are.
            denoised = [
                Denoised(
                    it, [torch.randint(0, model.mask_id, (model.num_codebooks, it.target_len))]
                )
                for it in items
            ]
            decode = timeit(lambda denoised=denoised: model.decode(denoised), sync, repeats=3)
            on_gpu = args.device.startswith("cuda")
            free_of_syncs = step_free_of_syncs(state) if on_gpu else None
            batch_free = batch_free_of_syncs(model, b) if on_gpu else None
            caps = attention_caps(model, state, sync) if model.runner is not None else {}
            fused = fused_scoring(state, logits, sync) if on_gpu else {}
        flops = useful_flops(model.model.cfg, state.packed.segment_lens, state.packed.num_targets)
        row = {
            "batch": b,
            "fused_norm_rope": bool(model.runner is not None and model.runner.fused_norm_rope),
            "residual_in_place": bool(model.runner is not None and model.runner.residual_in_place),
            "tokens": state.packed.num_tokens,
            "forward_ms": round(fwd * 1e3, 2),
            "choose_ms": round(choose * 1e3, 2),
            "reveal_ms": round(reveal * 1e3, 2),
            "step_ms": round(step * 1e3, 2),
            "forward_tflops": round(flops / fwd / 1e12, 1),
            "decode_ms": round(decode * 1e3, 1),
            "audio_s": round(sum(it.target_len for it in items) / model.frame_rate, 1),
            "step_free_of_syncs": free_of_syncs,
            "batch_free_of_syncs": batch_free,
            **caps,
            **fused,
        }
        if model.runner is not None:
            row["graph_hits"], row["graph_misses"] = (
                model.runner.stats.graph_hits,
                model.runner.stats.graph_misses,
            )
            row["capture_s"] = model.runner.stats.capture_s
        print(json.dumps(row), flush=True)
        out.append(row)
    if args.out:
        args.out.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
