"""The layer stack compiled by regions (`sidecar.runtime.regions`), on the CPU with Inductor's CPU
backend: its hidden states are those of the stack compiled whole, bit for bit, and its layers
share one compilation, so a start traces one layer however many the model has. The stack
compiled whole is built here, as the runtime once did (torch.compile of `stack_packed`, with
the runtime's Inductor options); on a GPU the two gave the same logits bit for bit (CI has no
GPU)."""

from __future__ import annotations

import dataclasses

import torch
from torch._dynamo.utils import counters

from sidecar.runtime.model import OmniVoiceModel
from sidecar.runtime.options import RuntimeOptions
from sidecar.runtime.regions import EAGER_ROUNDING, RegionalStack
from sidecar.runtime.runner import ModelRunner
from tests.helpers.packed_batches import CFG, batch_of, forward_args

ARGS = forward_args(batch_of([(30, 10, 12), (17, 5, 9)]))


def tiny(layers: int) -> OmniVoiceModel:
    torch.manual_seed(0)
    return OmniVoiceModel(dataclasses.replace(CFG, num_layers=layers)).eval()


def hidden(model: OmniVoiceModel, regions: bool) -> tuple[torch.Tensor, int]:
    """The compiled hidden states, and how many frames dynamo compiled for them."""
    torch._dynamo.reset()
    counters.clear()
    runner = ModelRunner(model, RuntimeOptions(cuda_graphs=False, compile=True))
    assert isinstance(runner.stack_fn, RegionalStack)
    stack = runner.stack_fn
    if not regions:
        stack = torch.compile(model.stack_packed, dynamic=True, options=dict(EAGER_ROUNDING))
    with torch.inference_mode():
        out = model.hidden_packed(*ARGS, stack=stack)
    frames = int(counters["frames"]["ok"])
    torch._dynamo.reset()
    return out, frames


def test_the_stack_compiled_by_regions_equals_the_stack_compiled_whole() -> None:
    model = tiny(4)
    whole, _ = hidden(model, regions=False)
    by_regions, _ = hidden(model, regions=True)
    assert torch.equal(by_regions, whole)


def test_by_regions_every_layer_runs_one_compilation() -> None:
    """Twice the layers, no more frames traced. (Each layer compiled as a function of its
    module would trace once per layer: dynamo guards such an argument by its identity.)"""
    _, two = hidden(tiny(2), regions=True)
    _, four = hidden(tiny(4), regions=True)
    assert two == four
