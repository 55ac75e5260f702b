"""What the attention benchmarks (`attention_kernels.py`, `probe_faster_attention.py`) measure
on: the segments the scheduler packs from the harness's mixed texts, random q/k/v of the
backbone's shapes over them, a CUDA graph captured the way the runtime captures one, and the
summary each result file starts with."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import workloads


def segment_lens(checkpoint: str, items: int) -> tuple[list[int], tuple[int, int, int]]:
    """The packed segment lengths of `items` mixed texts (auto voice, up to 60 words each; a
    conditional and an unconditional segment per item, prompts built by the runtime itself), and
    the backbone's (query heads, key/value heads, head size)."""
    from sidecar.runtime.batch import pack
    from sidecar.runtime.omnivoice import OmniVoice
    from sidecar.runtime.options import RuntimeOptions
    from sidecar.runtime.request import GenerationRequest

    model = OmniVoice.load(
        checkpoint, device="cpu", dtype="float32", options=RuntimeOptions(compile=False)
    )
    texts = [r.text for r in workloads.mixed(4 * items) if r.words <= 60][:items]
    prompts = []
    for i, text in enumerate(texts):
        it = model.prompter.prepare(GenerationRequest(text=text, seed=i))
        p = model.prompter.prompt(it, it.text, it.target_len, None, None)
        prompts.append((p.input_ids, p.audio_start, p.target_len))
    cfg = model.model.cfg
    return pack(prompts).segment_lens, (cfg.num_heads, cfg.num_kv_heads, cfg.head_dim)


def random_qkv(
    tokens: int, shape: tuple[int, int, int], device: torch.device, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Packed q [tokens, heads, dim] and k, v [tokens, kv heads, dim] for `shape` (heads, kv
    heads, dim), from seed 0."""
    heads, kv_heads, dim = shape
    gen = torch.Generator(device=device).manual_seed(0)
    q = torch.randn(tokens, heads, dim, device=device, dtype=dtype, generator=gen)
    k = torch.randn(tokens, kv_heads, dim, device=device, dtype=dtype, generator=gen)
    v = torch.randn(tokens, kv_heads, dim, device=device, dtype=dtype, generator=gen)
    return q, k, v


def capture(fn: Any, calls: int = 1) -> tuple[torch.cuda.CUDAGraph, list[Any]]:
    """A CUDA graph of `calls` calls of `fn`, after two warm-up calls on a side stream (which
    build and load everything outside the capture, as capture asks), and the captured outputs."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn(), fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outs = [fn() for _ in range(calls)]
    return graph, outs


def summary(items: int, lens: list[int], device: torch.device) -> dict[str, Any]:
    """The keys a result file starts with: the segments measured, the card, PyTorch's version."""
    n = sum(lens)
    on_gpu = device.type == "cuda"
    return {
        "items": items,
        "segments": len(lens),
        "tokens": n,
        "mean_segment": round(n / len(lens), 1),
        "longest_segment": max(lens),
        "gpu": torch.cuda.get_device_name(device) if on_gpu else "none (CPU check)",
        "torch": torch.__version__,
    }
