"""Each compiled layer's two projections added onto the residual stream in place
(sidecar/runtime/residual.py). Compiled, `residual + x @ w.T` is one addmm that first copies the residual
into a new buffer; the custom op makes the same product add onto the residual's own buffer. On
the CPU (Inductor's CPU backend) the compiled stack's hidden states must stay the same bit for
bit and the generated code call the op; on the GPU the stack with the copy against the stack
without it (`bench/stack_check.py --compare`) showed the same logits bit for bit and the copies
gone (bench/results/2026-12-02-residual-in-place.json)."""

from __future__ import annotations

import pytest
import torch

from sidecar.runtime.model import OmniVoiceModel
from sidecar.runtime.options import RuntimeOptions
from sidecar.runtime.residual import add_product_
from sidecar.runtime.runner import ModelRunner
from tests.helpers.packed_batches import CFG, batch_of, forward_args


@pytest.fixture
def model() -> OmniVoiceModel:
    """A fresh model for each test: the runner sets its layers' flag."""
    torch.manual_seed(0)
    return OmniVoiceModel(CFG).eval()


def test_the_product_is_added_where_the_residual_lies() -> None:
    gen = torch.Generator().manual_seed(1)
    residual, x, weight = (torch.randn(shape, generator=gen) for shape in ((7, 5), (7, 3), (5, 3)))
    want = torch.addmm(residual, x, weight.t())
    address = residual.data_ptr()
    add_product_(residual, x, weight)
    assert residual.data_ptr() == address
    assert torch.equal(residual, want)


def test_compiled_layers_add_in_place_with_the_same_hidden_states(model: OmniVoiceModel) -> None:
    """The runner turns the op on only on a GPU in half precision; here the layers are switched
    by hand, in float32, where Inductor's CPU code makes the same addmm of the adds."""
    from torch._inductor.utils import run_and_get_code

    args = forward_args(batch_of([(30, 10, 12), (17, 5, 9)]))
    got, codes = {}, {}
    with torch.inference_mode():
        for in_place in (False, True):
            torch._dynamo.reset()
            runner = ModelRunner(model, RuntimeOptions(cuda_graphs=False, compile=True))
            for layer in model.llm.layers:  # read when the stack is traced, at its first call
                layer.residual_in_place = in_place
            got[in_place], code = run_and_get_code(runner.hidden_fn, *args)
            codes[in_place] = "\n".join(code)
    torch._dynamo.reset()
    # The CPU's attention runs per segment and breaks the graph: the code comes as several
    # graphs, each generated once however many layers run it, so count at least two calls.
    assert codes[True].count("torch.ops.omnivoice.add_product_.default(") >= 2
    assert "extern_kernels.addmm(" not in codes[True]
    assert "extern_kernels.addmm(" in codes[False]  # what the op replaces
    assert torch.equal(got[True], got[False])


@pytest.mark.parametrize("compile", [False, True])
def test_the_cpu_keeps_its_rounding(model: OmniVoiceModel, compile: bool) -> None:
    """Eager, a layer adds as PyTorch and the reference do (a product, then a sum), and so does
    Inductor's CPU code in half precision (`test_compiled_stack_rounds_as_eager_does`); the
    in-place addmm rounds once, so the runner leaves it off there."""
    runner = ModelRunner(model, RuntimeOptions(cuda_graphs=False, compile=compile))
    assert not runner.residual_in_place
    assert not any(layer.residual_in_place for layer in model.llm.layers)
