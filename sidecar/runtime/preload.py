"""The part of a start that needs no device: what a spare sidecar does before it parks.

A spare (`python -m sidecar --park`, supervisor/supervision/spare.py) is started ahead of need
and must not touch its GPU until the supervisor says `go`: the GPU may still hold the memory of
the sidecar it will replace. `load_on_host` does everything before that point: the checkpoint
resolved and checked, the text tokenizer, the backbone's weights read into host memory as
stored, the codec built and loaded on the CPU, the compiler's modules imported and its cache
keys worked out (torch.compile otherwise does both at the start's first compilation).
`OmniVoice.load(..., host=...)` then only moves the weights to the device, casts them there,
and compiles and captures.

Nothing here creates a CUDA context: the weights stay on the CPU (pinned memory would need one),
and importing Inductor and Triton initialises no device.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from tokenizers import Tokenizer

from sidecar.runtime.codec import Codec, load_codec
from sidecar.runtime.loader import (
    DTYPES,
    check_layout,
    load_tokenizer,
    read_safetensors,
    resolve_checkpoint,
)
from sidecar.shared.errors import InvalidInput

# Imported ahead by a spare; each costs seconds at a start's first torch.compile otherwise.
COMPILER_MODULES = ("torch._dynamo", "torch._inductor.compile_fx", "torch._inductor.codecache")


@dataclass
class HostLoad:
    """A checkpoint read into host memory, ready to be moved to a device."""

    root: Path
    tokenizer: Tokenizer
    weights: dict[str, torch.Tensor]  # the backbone's model.safetensors, as stored, on the CPU
    codec: Codec  # on the CPU; its weights float32 (see `Codec`)


CACHE_KEYS = (
    ("torch._inductor.codecache", "torch_key"),
    ("torch._inductor.runtime.triton_compat", "triton_key"),
)


def load_on_host(source: str, dtype: str, report: Callable[[str], None]) -> HostLoad:
    """Resolve, read and build what the device is not needed for; `report` names each stage."""
    if dtype not in DTYPES:
        raise InvalidInput(f"dtype {dtype!r} is not one of {', '.join(DTYPES)}")
    report("resolve")
    root = resolve_checkpoint(source)
    check_layout(root)
    report("tokenizer")
    tokenizer = load_tokenizer(root)
    report("model")
    weights = read_safetensors(root / "model.safetensors", "cpu")
    report("codec")
    codec = load_codec(root / "audio_tokenizer", device="cpu", dtype=DTYPES[dtype])
    report("compiler")
    for name in COMPILER_MODULES:
        importlib.import_module(name)
    # The hashes of torch's and Triton's sources, which key the compile cache: worked out once
    # per process, at its first compilation otherwise. Where they live differs between torch
    # builds (a GPU build's triton_key is not in codecache); a saving, never a reason to fail.
    for module, name in CACHE_KEYS:
        with contextlib.suppress(ImportError, AttributeError):
            getattr(importlib.import_module(module), name)()
    return HostLoad(root, tokenizer, weights, codec)
