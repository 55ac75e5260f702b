"""Fused vs separate q/k/v and gate/up projections: the packed denoising forward through
ModelRunner (torch.compile and CUDA graphs on a GPU), for one batch of auto-voice items.

    python bench/fused_ab.py --checkpoint /tmp/full --out bench/results/fused_ab.json     # H200, bf16
    python bench/fused_ab.py --device cpu --checkpoint TINY_DIR --items 4 --out /tmp/ab.json  # dry run

A --checkpoint that does not exist gives the published shapes with random weights (timing only).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sidecar.batch import pack  # noqa: E402
from sidecar.checkpoint import SIZES, omnivoice_config  # noqa: E402
from sidecar.config import ModelConfig  # noqa: E402
from sidecar.generate import useful_flops  # noqa: E402
from sidecar.loader import DTYPES, load_model  # noqa: E402
from sidecar.model import OmniVoiceModel  # noqa: E402
from sidecar.runner import DEFAULT_BUCKETS, ModelRunner  # noqa: E402


def build(checkpoint: Path, device: str, dtype: torch.dtype) -> tuple[OmniVoiceModel, str]:
    if (checkpoint / "model.safetensors").is_file():
        return load_model(checkpoint, device, dtype), str(checkpoint)
    torch.manual_seed(0)
    with torch.device(device):
        model = OmniVoiceModel(ModelConfig.from_dict(omnivoice_config(SIZES["full"])))
    return model.to(dtype).eval(), "random full-size weights"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", type=Path, default=Path("/tmp/full"))
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", default=None, help="default: bfloat16 on a GPU, float32 on the CPU")
    ap.add_argument("--items", type=int, default=64)
    ap.add_argument("--target", type=int, default=250, help="target frames per item (25 a second)")
    ap.add_argument("--text", type=int, default=40, help="text tokens per item")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    cuda = args.device.startswith("cuda")
    dtype = args.dtype or ("bfloat16" if cuda else "float32")
    model, source = build(args.checkpoint, args.device, DTYPES[dtype])
    cfg = model.cfg
    gen = torch.Generator().manual_seed(0)
    prompts = []
    for _ in range(args.items):  # [text | MASK target]: an auto-voice item on its first step
        ids = torch.randint(0, 1000, (cfg.num_codebooks, args.text + args.target), generator=gen)
        ids[:, args.text :] = cfg.audio_mask_id
        prompts.append((ids, args.text, args.target))
    b = pack(prompts)
    inputs = (b.input_ids.to(args.device), b.audio_mask.to(args.device), b.positions.to(args.device),
              b.cu_seqlens.to(args.device), b.max_seqlen, b.head_index.to(args.device))
    bucket = next((n for n in DEFAULT_BUCKETS if n >= b.num_tokens), DEFAULT_BUCKETS[-1])
    flops = useful_flops(cfg, b.segment_lens, b.num_targets)
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    result: dict = {"source": source, "device": torch.cuda.get_device_name() if cuda else "cpu", "dtype": dtype,
                    "items": args.items, "tokens": b.num_tokens, "bucket": bucket, "useful_gflops_per_forward": round(flops / 1e9, 1)}
    logits = {}
    for name, fuse in (("unfused", False), ("fused", True)):
        torch._dynamo.reset()
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        began = time.perf_counter()
        runner = ModelRunner(model, buckets=(bucket,), use_graphs=cuda, compile=cuda, fuse=fuse)
        runner.capture()
        with torch.inference_mode():
            for _ in range(3):
                runner.forward(*inputs)
            sync()
            runner.collect_timings()
            runner.stats.forward_s, passes = 0.0, runner.stats.forward_passes
            start = time.perf_counter()
            for _ in range(args.repeats):
                out = runner.forward(*inputs)
            sync()
            wall = (time.perf_counter() - start) / args.repeats
            runner.collect_timings()
            logits[name] = out.float().cpu()
        ms = runner.stats.forward_s / (runner.stats.forward_passes - passes) * 1e3
        result[name] = {"ms_per_forward": round(ms, 3), "wall_ms_per_forward": round(wall * 1e3, 3), "useful_tflops": round(flops / ms / 1e9, 1),
                        "graph_hits": runner.stats.graph_hits, "setup_s": round(time.perf_counter() - began - wall * args.repeats, 1)}
        if cuda:
            result[name]["peak_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
        del runner
        if cuda:
            torch.cuda.empty_cache()
    result["speedup"] = round(result["unfused"]["ms_per_forward"] / result["fused"]["ms_per_forward"], 3)
    result["logits_max_abs_diff"] = float((logits["fused"] - logits["unfused"]).abs().max())
    result["logits_equal"] = bool(torch.equal(logits["fused"], logits["unfused"]))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
