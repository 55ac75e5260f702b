"""torch.compile of the layer stack, by regions.

The embedding, a decoder layer and the final norm are compiled apart, and every layer runs the
one layer's compiled code with its own weights as inputs (`nn.Module.compile` guards a module
by its type and its tensors' shapes, not by which module it is), so a start traces one layer,
not the stack. The compile cache
(`compile_cache.py`) saves Inductor's work but not dynamo's trace, so the trace is what a
respawn pays each time; compiled whole, as one function, dynamo traced all 28 layers at every
start. The operations and their order are the same, so the logits are those of the stack
compiled whole, bit for bit (tests/sidecar/runtime/test_regions.py on the CPU).

Inductor rounds every intermediate to the model's dtype where eager PyTorch would
(`emulate_precision_casts`, EAGER_ROUNDING): without it the fused kernels keep float32 between
operations, which moved the first step's KL divergence from the float32 reference well past the
reference's own bf16 on a confident checkpoint (docs/PERFORMANCE.md, "Correctness on the GPU").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from sidecar.runtime.model import DecoderLayer, OmniVoiceModel

# torch.compile's `options` (Inductor's settings by name)
CompileOptions = dict[str, str | int | bool | Callable[..., Any]]
# Inductor's options for every region: rounding as eager PyTorch does (see the docstring).
EAGER_ROUNDING: CompileOptions = {"emulate_precision_casts": True}


class PackedLayer(nn.Module):
    """A decoder layer's packed forward as its `forward`, the method `nn.Module.compile`
    compiles: the wrappers of all the layers then share one compiled graph."""

    def __init__(self, layer: DecoderLayer) -> None:
        super().__init__()
        self.layer = layer

    def forward(
        self,
        h: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        cu_seqlens: torch.Tensor,
        max_seqlen: int,
    ) -> torch.Tensor:
        return self.layer.forward_packed(h, cos, sin, cu_seqlens, max_seqlen)


class RegionalStack:
    """`OmniVoiceModel.stack_packed`, its three parts compiled apart."""

    def __init__(self, model: OmniVoiceModel, compile_options: CompileOptions) -> None:
        self.embed = torch.compile(model.embed_packed, dynamic=True, options=compile_options)
        self.layers = [PackedLayer(layer) for layer in model.llm.layers]
        for layer in self.layers:
            layer.compile(dynamic=True, options=compile_options)
        self.norm = torch.compile(model.norm_packed, dynamic=True, options=compile_options)

    def __call__(  # noqa: PLR0913  stack_packed's arguments
        self,
        input_ids: torch.Tensor,
        audio_mask: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        cu_seqlens: torch.Tensor,
        max_seqlen: int,
        head_index: torch.Tensor,
    ) -> torch.Tensor:
        h = self.embed(input_ids, audio_mask)
        for layer in self.layers:
            h = layer(h, cos, sin, cu_seqlens, max_seqlen)
        return self.norm(h, head_index)


def compiled_stack(model: OmniVoiceModel) -> Callable[..., torch.Tensor]:
    """The layer stack compiled by regions (dynamic shapes: one compilation for every bucket;
    Inductor rounding as eager PyTorch does)."""
    return RegionalStack(model, dict(EAGER_ROUNDING))
