"""Step 0 on confident checkpoints of seeds 1 and 2: does torch.compile always stray further
from float32 than eager does on the all-MASK uncond rows, and does Inductor's
emulate_precision_casts (round every intermediate as eager does) close the gap?

    PYTHONPATH=REFSITE:. python3 bench/fidelity_seeds.py OUT.json

Per state and arm: [KL of the guided distribution, KL of the uncond rows alone].
"""

import json
import sys
from pathlib import Path

import torch
import torch._inductor.config as icfg

sys.path.insert(0, "bench")
import fidelity as F

from sidecar.devtools.checkpoint import make_checkpoint

F.STEPS = (0, 8)
dev = "cuda:0"
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


def kl(la, lx, m):
    return float(((la.exp() * (la - lx)).sum(-1))[m].double().mean())


out = {}
for seed in (1, 2):
    ck = Path(f"/tmp/conf{seed}")
    make_checkpoint(ck, "full", seed=seed, confident=True)
    ref32 = F.reference(ck, dev, torch.float32)
    states, extra = F.capture_states(ref32, 24)
    ref16 = F.reference(ck, dev, torch.bfloat16)
    with torch.inference_mode():
        refs = [(F.ref_logits(ref32, st), F.ref_logits(ref16, st)) for st in states]
    del ref32, ref16
    arms = {}
    for name in ("eager", "compiled", "compiled_emulate"):
        icfg.emulate_precision_casts = name == "compiled_emulate"
        torch._dynamo.reset()
        ours = F.Ours.load(
            str(ck), device=dev, dtype="bfloat16", cuda_graphs=False, compile=name != "eager"
        )
        for st, (a, b) in zip(states, refs):
            with torch.inference_mode():
                bs = F.batch_state(ours, st.prompts())
                c = bs.forward()
                s, V = a.shape[0] // 2, ours.mask_id
                masked = (bs.tokens[:, :-1] == V).T
                ga = bs.log_probs(a.clone())[..., :V]
                for arm, x in (("ref_bf16", b), (name, c)):
                    gx = bs.log_probs(x.clone())[..., :V]
                    r = out.setdefault(f"seed{seed}_g{st.group}s{st.step}", {})
                    r[arm] = [
                        kl(ga, gx, masked),
                        kl(
                            torch.log_softmax(a[s:, :, :V], -1),
                            torch.log_softmax(x[s:, :, :V], -1),
                            masked,
                        ),
                    ]
        del ours
        torch.cuda.empty_cache()
    for k, v in out.items():
        if k.startswith(f"seed{seed}"):
            print(k, json.dumps(v), flush=True)
Path(sys.argv[1]).write_text(json.dumps(out, indent=1))
