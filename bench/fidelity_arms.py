"""Which part of the served path moves the logits: torch.compile, CUDA graphs, or cuBLAS's
reduced-precision bf16 reduction.

    PYTHONPATH=REFSITE:. python3 bench/fidelity_arms.py CONFIDENT_CKPT OUT.json [cuda:0]
"""

import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, "bench")
import fidelity as F

F.STEPS = (0, 8)
ck = Path(sys.argv[1])
dev = sys.argv[3] if len(sys.argv) > 3 else "cuda:0"
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
ref32 = F.reference(ck, dev, torch.float32)
states, extra = F.capture_states(ref32, 24)
ref16 = F.reference(ck, dev, torch.bfloat16)
with torch.inference_mode():
    refs = [(F.ref_logits(ref32, st), F.ref_logits(ref16, st)) for st in states]
del ref32, ref16


def kl(la, lx, m):
    return float(((la.exp() * (la - lx)).sum(-1))[m].double().mean())


variants = {
    "served": dict(),
    "compile_only": dict(cuda_graphs=False),
    "graphs_only": dict(compile=False),
    "served_no_rr": dict(),
}
out = {}
for name, kw in variants.items():
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = name != "served_no_rr"
    ours = F.Ours.load(str(ck), device=dev, dtype="bfloat16", **kw)
    for st, (a, b) in zip(states, refs):
        with torch.inference_mode():
            bs = F.batch_state(ours, st.prompts())
            c = bs.forward()
            s, V = a.shape[0] // 2, ours.mask_id
            masked = (bs.tokens[:, :-1] == V).T
            ga = bs.log_probs(a.clone())[..., :V]
            row = {}
            for arm, x in (("ref_bf16", b), (name, c)):
                gx = bs.log_probs(x.clone())[..., :V]
                row[arm] = {
                    "kl_guided": kl(ga, gx, masked),
                    "kl_cond": kl(
                        torch.log_softmax(a[:s, :, :V], -1),
                        torch.log_softmax(x[:s, :, :V], -1),
                        masked,
                    ),
                    "kl_uncond": kl(
                        torch.log_softmax(a[s:, :, :V], -1),
                        torch.log_softmax(x[s:, :, :V], -1),
                        masked,
                    ),
                    "max_abs": float((x - a).abs().max()),
                }
            out.setdefault(f"g{st.group}s{st.step}", {}).update(row)
        print(name, f"g{st.group}s{st.step}", json.dumps(row), flush=True)
    del ours
    torch.cuda.empty_cache()
Path(sys.argv[2]).write_text(json.dumps(out, indent=1))
