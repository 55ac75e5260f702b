"""Teacher-forced fidelity of the bf16 fast path: the same states through three forward passes.

    PYTHONPATH=REFSITE:. python3 bench/fidelity.py --workdir /tmp/fidelity --commit HASH \\
        --out bench/results/DATE-fidelity.json

One command: it writes the two full-size checkpoints it needs under --workdir if they are not
there (`plain`, and `confident`, whose audio head is as peaked as a trained model's), then for
each of them:

1. runs the reference `generate()` in float32 (TF32 off) on --items mixed items (default 64:
   auto voice, voice design, a 5 s clone prompt; greedy settings; GROUP items a call) and keeps the partially revealed state it feeds
   the network at the measured steps (first, quarter points, last);
2. gives each kept state to (a) the reference in float32, (b) the reference in bf16 and (c) our
   runtime in bf16 exactly as the sidecar loads it (packed segments, FlashAttention varlen,
   torch.compile, CUDA graphs), and scores every arm's logits with the same decision code
   (`sidecar.runtime.generate.BatchState`: guidance, MASK forbidden, per-item top-k reveal);
3. per step, for (b) and (c) against (a): `kl` = mean KL(a || x) of the guided distribution of
   every still-masked position, `top1` = share of the positions (a) reveals at this step that x
   also reveals with the same token, `max_abs_logit_diff` over every target logit;
4. packing: each item's logits from our path alone and packed among 63 other requests of other
   kinds and lengths (half-revealed states), against `bf16_noise`, the largest difference the
   reference's own bf16 makes to those items' logits (b against a).

Feeding the same state to every arm takes the cascades of free-running decoding out of the
measurement. Exits 1 unless every step is green: ours' KL at most 1 % above the reference bf16's;
ours' top1 at most 1 point below it over all measured steps together, and at each step at most
max(1 point, 2 standard errors of the paired difference) below it (a step that reveals a few
hundred positions counts a point in a handful of them: there a 1-point band is counting noise);
packing within bf16 noise. Bench only: imports the reference.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import workloads

from sidecar.devtools.checkpoint import make_checkpoint
from sidecar.runtime.generate import BatchState, Prompt
from sidecar.runtime.omnivoice import OmniVoice as Ours
from sidecar.runtime.options import RuntimeOptions
from sidecar.runtime.request import GenerationRequest, VoicePrompt

GREEDY = {"position_temperature": 0.0, "class_temperature": 0.0}
NUM_STEP = 32
STEPS = (0, 8, 16, 24, 31)
PACKING_STEP = 16
PACK_SIZE = 64  # the sidecar's largest batch
GROUP = 32  # items a reference generate() call: both rows fit one of our packed batches
KL_SLACK = 1.01  # ours' KL may exceed the reference bf16's by 1 %
TOP1_SLACK = 0.01  # ours' top1 may fall 1 point below it (per step: or 2 standard errors)


@dataclass
class State:
    """The reference's padded batch as it entered the network at one step of one generate()."""

    group: int
    step: int
    input_ids: torch.Tensor  # [2B, C, L]
    audio_mask: torch.Tensor  # [2B, L]
    attention_mask: torch.Tensor  # [2B, 1, L, L]

    @property
    def rows(self) -> int:
        return self.input_ids.shape[0] // 2

    def layout(self) -> list[tuple[int, int, int]]:
        """(c_len, target_len, audio_start) per item, read off the reference's masks."""
        b, out = self.rows, []
        for i in range(b):
            c_len = int(self.attention_mask[i, 0, 0].sum())
            t_len = int(self.attention_mask[b + i, 0, 0].sum())
            out.append((c_len, t_len, int(self.audio_mask[i].nonzero()[0])))
        return out

    def prompts(self) -> list[Prompt]:
        """Our prompts holding this state: cond ids with the target revealed so far."""
        return [
            Prompt(self.input_ids[i, :, :c].cpu(), a, t, num_step=NUM_STEP, **GREEDY)
            for i, (c, t, a) in enumerate(self.layout())
        ]

    def to_targets(self, logits: torch.Tensor) -> torch.Tensor:
        """Reference logits [2B, C, L, V] -> our target layout [2S, C, V] (cond, then uncond)."""
        b, lay = self.rows, self.layout()
        cond = [logits[i, :, c - t : c] for i, (c, t, _) in enumerate(lay)]
        uncond = [logits[b + i, :, :t] for i, (_, t, _) in enumerate(lay)]
        return torch.cat(cond + uncond, dim=1).permute(1, 0, 2).float()


def work(count: int) -> tuple[list[str], list[str | None], list[str]]:
    """agreement.py's items (its first `count`): auto and design texts, then the clone texts."""
    items = [r for r in workloads.mixed(400, seed=5) if r.words <= 60][:count]
    plain = [r for r in items if r.kind != "clone"]
    clone = [r.text for r in items if r.kind == "clone"] or [items[0].text]
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
            "band": max(TOP1_SLACK, 2 * se),
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
        item = ours._normalise(req)
        prompt = ours._chunk_prompt(item, ours._chunk_texts(item), 0, None)
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


def measure(
    checkpoint: Path, device: str, count: int, eager_rounding: bool, fused_norm_rope: bool = True
) -> dict[str, Any]:
    torch.backends.cuda.matmul.allow_tf32 = False  # the float32 reference is float32
    torch.backends.cudnn.allow_tf32 = False
    ref32 = reference(checkpoint, device, torch.float32)
    states, extra = capture_states(ref32, count)
    ref16 = reference(checkpoint, device, torch.bfloat16)
    ours = Ours.load(
        str(checkpoint),
        device=device,
        dtype="bfloat16",
        options=RuntimeOptions(eager_rounding=eager_rounding, fused_norm_rope=fused_norm_rope),
    )
    tallies = {step: (Tally(), Tally()) for step in STEPS}
    discords = {step: Discord() for step in STEPS}
    top1_prob: list[float] = []
    kept32: list[torch.Tensor] = []
    kept16: list[torch.Tensor] = []
    kept: list[State] = []
    prompts_equal = True
    for state in states:
        prompts = state.prompts()
        ours_state = batch_state(ours, prompts)
        if state.step == 0:
            # Every arm is fed the reference's state; this checks that our own prompt builder
            # would have made the same tokens. The length estimate sums floats with sum(), which
            # Python 3.12 compensates and 3.11 does not: on 3.11 (a CPU dry run here) one item
            # comes out a frame shorter in the reference, so expect false there.
            built = [
                ours._chunk_prompt(it, [it.text], 0, None)
                for it in map(ours._normalise, extra["requests"][state.group])
            ]
            prompts_equal &= all(
                torch.equal(p.input_ids, q.input_ids) for p, q in zip(prompts, built)
            )
        with torch.inference_mode():
            a, b = ref_logits(ref32, state), ref_logits(ref16, state)
            c = ours_state.forward()
            masked = (ours_state.tokens[:, :-1] == ours.mask_id).T
            decided = [(x, *decide(ours_state, x, state.step)) for x in (a, b, c)]
            s = a.shape[0] // 2
            if state.step == 0:
                probs = torch.softmax(a[:s, :, : ours.mask_id], dim=-1)
                top1_prob.append(float(probs.max(-1)[0].mean()))
            ref_tally, ours_tally = tallies[state.step]
            revealed = ref_tally.add(decided[0], decided[1], masked, ours.mask_id)
            ours_tally.add(decided[0], decided[2], masked, ours.mask_id)
            discords[state.step].add(ref_tally, ours_tally, revealed)
        if state.step == PACKING_STEP:
            kept.append(state)
            kept32.append(a)
            kept16.append(b)
    with torch.inference_mode():
        pack = packing(ours, kept, kept32, kept16, extra["voice"])
    steps = [
        {
            "step": k,
            "ref_bf16": tallies[k][0].result(),
            "ours_bf16": tallies[k][1].result(),
            "top1_paired": discords[k].result(),
        }
        for k in STEPS
    ]
    pooled = Discord()
    for k in STEPS:
        pooled = pooled.merged(discords[k])
    hits = [sum(tallies[k][arm].top1_hits for k in STEPS) for arm in (0, 1)]
    eager_rounding = bool(ours.runner and ours.runner.eager_rounding)
    del ref32, ref16, ours
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
        "eager_rounding": eager_rounding,
        "mean_top1_prob": float(np.mean(top1_prob)),
        "items": sum(st.rows for st in states if st.step == 0),
        "prompts_equal_to_ours": prompts_equal,
    }


def verdict(result: dict[str, Any]) -> list[str]:
    """Every way the run is not green, as sentences (empty: green)."""
    failures = []
    for name, c in result["checkpoints"].items():
        for s in c["steps"]:
            ref, ours = s["ref_bf16"], s["ours_bf16"]
            if ours["kl"] > KL_SLACK * ref["kl"]:
                failures.append(f"{name} step {s['step']}: KL {ours['kl']:.3g} > {ref['kl']:.3g}")
            band = s["top1_paired"]["band"]
            if ours["top1"] < ref["top1"] - band:
                failures.append(
                    f"{name} step {s['step']}: top1 {ours['top1']:.4f} < {ref['top1']:.4f} "
                    f"- {band:.4f}"
                )
        pooled = c["top1_all_steps"]
        if pooled["ours_bf16"] < pooled["ref_bf16"] - TOP1_SLACK:
            failures.append(
                f"{name} all steps: top1 {pooled['ours_bf16']:.4f} < {pooled['ref_bf16']:.4f} - "
                f"{TOP1_SLACK}"
            )
        p = c["packing"]
        if p["max_abs_logit_diff"] > p["bf16_noise"]:
            failures.append(
                f"{name}: packing changes logits by {p['max_abs_logit_diff']:.3g} > "
                f"bf16 noise {p['bf16_noise']:.3g}"
            )
    if not all(c["prompts_equal_to_ours"] for c in result["checkpoints"].values()):
        failures.append("our prompt builder makes other tokens than the reference's")
    return failures


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
        "--checkpoints",
        default="plain,confident",
        help="which of the two to measure (a run cut short can be completed in parts)",
    )
    args = ap.parse_args()
    on_gpu = args.device.startswith("cuda")
    result: dict[str, Any] = {
        "commit": args.commit,
        "gpu": torch.cuda.get_device_name(args.device) if on_gpu else "cpu",
        "torch": torch.__version__,
        "python": platform.python_version(),
        "steps_measured": list(STEPS),
        "fused_norm_rope": not args.unfused_norm_rope,
        "checkpoints": {},
    }
    for name in args.checkpoints.split(","):
        path = args.workdir / name
        if not (path / "model.safetensors").is_file():
            print(f"writing the {name} checkpoint to {path}", flush=True)
            make_checkpoint(path, args.size, seed=0, confident=name == "confident")
        result["checkpoints"][name] = measure(
            path,
            args.device,
            args.items,
            eager_rounding=not args.no_eager_rounding,
            fused_norm_rope=not args.unfused_norm_rope,
        )
        print(json.dumps({name: result["checkpoints"][name]}), flush=True)
    failures = verdict(result)
    result["green"] = not failures
    result["failures"] = failures
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print("green" if not failures else "NOT green:\n  " + "\n  ".join(failures), flush=True)
    return 0 if not failures else 1


if __name__ == "__main__":
    raise SystemExit(main())
