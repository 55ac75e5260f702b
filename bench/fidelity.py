"""Teacher-forced fidelity of the bf16 fast path: the same states through many forward passes.

    PYTHONPATH=REFSITE:. python3 bench/fidelity.py --workdir /tmp/fidelity --commit HASH \\
        --out bench/results/DATE-fidelity.json

One command: it writes the two full-size checkpoints it needs under --workdir if they are not
there (`plain`, and `confident`, whose audio head is as peaked as a trained model's), then for
each of them:

1. runs the reference `generate()` in float32 (TF32 off) on --items mixed items (default 64:
   auto voice, voice design, a 5 s clone prompt; greedy settings; GROUP items a call) and keeps
   the partially revealed state it feeds the network at the measured steps (first, quarter
   points, last);
2. gives each kept state to (a) the reference in float32, (b) the reference's own bf16 variants
   (`bench/fidelity_reference.py`: its attention backends, eager against compiled, the same
   items batched otherwise; `sdpa`, the reference as it runs, is `ref_bf16`) and (c) our
   runtime in bf16 exactly as the sidecar loads it (packed segments, FlashAttention varlen,
   torch.compile, CUDA graphs), and scores every arm's logits with the same decision code
   (`sidecar.runtime.generate.BatchState`: guidance, MASK forbidden, per-item top-k reveal);
3. per step, for every arm against (a): `kl` = mean KL(a || x) of the guided distribution of
   every still-masked position, `top1` = share of the positions (a) reveals at this step that x
   also reveals with the same token, `max_abs_logit_diff` over every target logit; and for (c)
   against `ref_bf16`, the paired difference of their top1 (`top1_paired`);
4. packing: each item's logits from our path alone and packed among 63 other requests of other
   kinds and lengths (half-revealed states).

Feeding the same state to every arm takes the cascades of free-running decoding out of the
measurement. A dry run on the CPU: `--device cpu --size tiny --items 6` (minutes).
`bench/fidelity_gate.py` judges the result: per step the variants' largest KL and
smallest top1 make the `band`, and ours must lie inside it plus a stated margin; the pooled
top1, bit-equal packing and our prompts as the reference's too. The result file is written
after each checkpoint; exits 1 unless green. Bench only: imports the reference.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import fidelity_gate
import workloads
from fidelity_reference import DEFAULT, GREEDY, NUM_STEP, VARIANTS, State, Variants

from sidecar.devtools.checkpoint import make_checkpoint
from sidecar.runtime.generate import BatchState, Prompt
from sidecar.runtime.omnivoice import OmniVoice as Ours
from sidecar.runtime.options import ATTENTION_KERNELS, RuntimeOptions
from sidecar.runtime.request import GenerationRequest, VoicePrompt

STEPS = (0, 8, 16, 24, 31)
PACKING_STEP = 16
PACK_SIZE = 64  # the sidecar's largest batch
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


def batch_state(ours: Ours, prompts: list[Prompt]) -> BatchState:
    """Our batch holding the prompts' partially revealed targets, in the sidecar's runner."""
    state = BatchState(ours.model, prompts, ours.runner)
    state.tokens[:, :-1] = state.input_ids[:, state.cond_cols]
    return state


def decide(state: BatchState, logits: torch.Tensor, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(guided log-probs [S, C, V], the tokens after this step's reveal [S, C]); state unchanged."""
    tokens_before, ids_before = state.tokens.clone(), state.input_ids.clone()
    log_probs = state.log_probs(logits.clone())
    state.reveal(*state.choose(logits.clone(), step), step)
    after = state.tokens[:, :-1].T.clone()
    state.tokens.copy_(tokens_before)
    state.input_ids.copy_(ids_before)
    return log_probs, after


@dataclass
class Tally:
    """Sums over the states of one step, for one arm against the float32 reference."""

    kl_sum: float = 0.0
    masked: int = 0
    top1_hits: int = 0
    revealed: int = 0
    argmax_equal: int = 0
    max_abs_logit_diff: float = 0.0
    hits: torch.Tensor | None = None  # the last add()'s positions revealed as (a) did

    def add(
        self,
        ref: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
        arm: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
        masked: torch.Tensor,
        mask_id: int,
    ) -> int:
        """Count one state; returns the number of positions (a) reveals in it."""
        (logits_a, lp_a, after_a), (logits_x, lp_x, after_x) = ref, arm
        keep = torch.arange(lp_a.shape[-1], device=lp_a.device) != mask_id
        la, lx = lp_a[..., keep], lp_x[..., keep]
        kl = (la.exp() * (la - lx)).sum(-1)  # [S, C]
        self.kl_sum += float(kl[masked].double().sum())
        self.masked += int(masked.sum())
        revealed_a = masked & (after_a != mask_id)
        revealed_x = masked & (after_x != mask_id)
        self.hits = revealed_a & revealed_x & (after_a == after_x)  # for the paired comparison
        self.top1_hits += int(self.hits.sum())
        self.revealed += int(revealed_a.sum())
        self.argmax_equal += int((lp_a.argmax(-1) == lp_x.argmax(-1))[masked].sum())
        diff = float((logits_x - logits_a).abs().max())
        self.max_abs_logit_diff = max(self.max_abs_logit_diff, diff)
        return int(revealed_a.sum())

    def result(self) -> dict[str, float]:
        return {
            "kl": self.kl_sum / self.masked,
            "top1": self.top1_hits / self.revealed,
            "argmax_agreement": self.argmax_equal / self.masked,
            "max_abs_logit_diff": self.max_abs_logit_diff,
            "masked": self.masked,
            "revealed": self.revealed,
        }


@dataclass
class Discord:
    """The revealed positions where exactly one of (b) and (c) chose as (a) did: the paired
    difference of their top1 and its standard error (as McNemar's test counts them)."""

    ref_only: int = 0
    ours_only: int = 0
    revealed: int = 0

    def add(self, ref: Tally, ours: Tally, revealed: int) -> None:
        assert ref.hits is not None and ours.hits is not None
        self.ref_only += int((ref.hits & ~ours.hits).sum())
        self.ours_only += int((ours.hits & ~ref.hits).sum())
        self.revealed += revealed

    def merged(self, other: Discord) -> Discord:
        return Discord(
            self.ref_only + other.ref_only,
            self.ours_only + other.ours_only,
            self.revealed + other.revealed,
        )

    def result(self) -> dict[str, float]:
        n, b, c = self.revealed, self.ref_only, self.ours_only
        se = math.sqrt(max(0.0, b + c - (c - b) ** 2 / n)) / n if n else 0.0
        return {
            "ours_minus_ref": (c - b) / n if n else 0.0,
            "standard_error": se,
            "ref_only": b,
            "ours_only": c,
        }


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
    eager_rounding = bool(ours.runner and ours.runner.eager_rounding)
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


def main() -> int:
    ap = argparse.ArgumentParser(description="teacher-forced fidelity of the bf16 fast path")
    ap.add_argument(
        "--workdir",
        type=Path,
        default=Path("/tmp/fidelity"),
        help="where the plain and confident checkpoints are (written if missing)",
    )
    ap.add_argument("--commit", required=True, help="the clean commit measured")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--size", default="full", help="checkpoint size (tiny: a quick CPU dry run)")
    ap.add_argument("--items", type=int, default=64, help="work items (agreement.py's first N)")
    ap.add_argument(
        "--no-eager-rounding",
        action="store_true",
        help="not the served path: our compiled stack keeps float32 between fused operations "
        "(Inductor's default), as before 2026-12-01",
    )
    ap.add_argument(
        "--unfused-norm-rope",
        action="store_true",
        help="not the served path: attention's q/k norm and rotary compiled by Inductor, "
        "without sidecar/runtime/kernels/norm_rope.py's kernel",
    )
    ap.add_argument(
        "--attention",
        choices=ATTENTION_KERNELS,
        default=RuntimeOptions().attention,
        help="our packed segments' attention kernel (sidecar/runtime/options.py)",
    )
    ap.add_argument(
        "--variants",
        default=",".join(VARIANTS),
        help="the reference's bf16 variants that make the band (bench/fidelity_reference.py; "
        f"{DEFAULT} always runs)",
    )
    ap.add_argument(
        "--checkpoints",
        default="plain,confident",
        help="which of the two to measure (a run split over calls: bench/fidelity_gate.py "
        "judges the parts together)",
    )
    args = ap.parse_args()
    on_gpu = args.device.startswith("cuda")
    options = RuntimeOptions(
        eager_rounding=not args.no_eager_rounding,
        fused_norm_rope=not args.unfused_norm_rope,
        attention=args.attention,
    )
    result: dict[str, Any] = {
        "commit": args.commit,
        "gpu": torch.cuda.get_device_name(args.device) if on_gpu else "cpu",
        "torch": torch.__version__,
        "python": platform.python_version(),
        "steps_measured": list(STEPS),
        "fused_norm_rope": options.fused_norm_rope,
        "attention": options.attention,
        "checkpoints": {},
    }
    for name in args.checkpoints.split(","):
        path = args.workdir / name
        if not (path / "model.safetensors").is_file():
            print(f"writing the {name} checkpoint to {path}", flush=True)
            make_checkpoint(path, args.size, seed=0, confident=name == "confident")
        result["checkpoints"][name] = measure(
            path, args.device, args.items, options, args.variants.split(",")
        )
        print(json.dumps({name: result["checkpoints"][name]}), flush=True)
        failures = fidelity_gate.judge(result)  # written after each: a run cut short keeps it
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(fidelity_gate.report(result), flush=True)
    return 0 if not failures else 1


if __name__ == "__main__":
    raise SystemExit(main())
