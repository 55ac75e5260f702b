"""Step 0 split by rows: which arm's cond and uncond logits stray from the float32 reference.

    PYTHONPATH=REFSITE:. python3 bench/fidelity_uncond.py CONFIDENT_CKPT OUT.json [cuda:0]

A diagnostic of bench/fidelity.py's step-0 gap (2026-12-01 in docs/PERFORMANCE.md): the states of
steps 0 and 8, through the reference in bf16, our served path, our eager path (FlashAttention)
and our eager path with per-segment SDPA. KL of the guided, cond-only and uncond-only
distributions, and the spread of the uncond logits across an item's positions.
"""

import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, "bench")
import fidelity as F

import sidecar.runtime.attention as att

F.STEPS = (0, 8)
ck = Path(sys.argv[1])
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
dev = sys.argv[3] if len(sys.argv) > 3 else "cuda:0"
ref32 = F.reference(ck, dev, torch.float32)
states, extra = F.capture_states(ref32, 24)
ref16 = F.reference(ck, dev, torch.bfloat16)
served = F.Ours.load(str(ck), device=dev, dtype="bfloat16")
eager = F.Ours.load(str(ck), device=dev, dtype="bfloat16", cuda_graphs=False, compile=False)


def kl(la, lx, m):
    return float(((la.exp() * (la - lx)).sum(-1))[m].double().mean())


def half(logits: torch.Tensor, s: int, v: int, cond: bool) -> torch.Tensor:
    """Log-softmax of the cond (or uncond) rows alone, MASK left out."""
    rows = logits[:s] if cond else logits[s:]
    return torch.log_softmax(rows[:, :, :v], -1)


out = {}
for st in states:
    prompts = st.prompts()
    with torch.inference_mode():
        a = F.ref_logits(ref32, st)
        b = F.ref_logits(ref16, st)
        s = a.shape[0] // 2
        bs = F.batch_state(served, prompts)
        c = bs.forward()
        es = F.batch_state(eager, prompts)
        e = es.forward()
        orig = att.can_use_flash
        att.can_use_flash = lambda q: False
        try:
            f = F.batch_state(eager, prompts).forward()
        finally:
            att.can_use_flash = orig
        masked = (bs.tokens[:, :-1] == served.mask_id).T
        V = served.mask_id
        row = {}
        ga = bs.log_probs(a.clone())[..., :V]
        for name, x in (("ref_bf16", b), ("served", c), ("eager_flash", e), ("eager_sdpa_bf16", f)):
            gx = bs.log_probs(x.clone())[..., :V]
            row[name] = {
                "kl_guided": kl(ga, gx, masked),
                "kl_cond": kl(half(a, s, V, True), half(x, s, V, True), masked),
                "kl_uncond": kl(half(a, s, V, False), half(x, s, V, False), masked),
                "mad_cond": float((x[:s] - a[:s]).abs().mean()),
                "mad_uncond": float((x[s:] - a[s:]).abs().mean()),
                "argmax": float((ga.argmax(-1) == gx.argmax(-1))[masked].float().mean()),
            }
        # uncond spread across positions of one item (zero in exact arithmetic at step 0)
        off = bs.packed.target_offsets
        spread = {}
        for name, x in (("ref_fp32", a), ("ref_bf16", b), ("served", c), ("eager_sdpa_bf16", f)):
            u = x[s:]
            spread[name] = float(
                sum(float(u[off[i] : off[i + 1]].std(0).mean()) for i in range(len(off) - 1))
                / (len(off) - 1)
            )
        row["uncond_spread"] = spread
        out[f"g{st.group}s{st.step}"] = row
    print(json.dumps({f"g{st.group}s{st.step}": row}), flush=True)
Path(sys.argv[2]).write_text(json.dumps(out, indent=1))
