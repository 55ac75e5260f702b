"""sidecar/runtime/attention.py's choice of kernel, on the CPU: which kernel a runner gets for
what it asked, the fallback to FlashAttention-2 where cuDNN's cannot run, and the ragged layout
cuDNN is told (sidecar/runtime/kernels/ragged.py). The kernels themselves need a Hopper GPU (not
in CI): bench/attention_kernels.py measures them there, their speed, their CUDA graphs and
whether an item's result depends on what it is packed with."""

from __future__ import annotations

import itertools
import logging
import sys

import pytest
import torch

from sidecar.runtime import attention
from sidecar.runtime.attention import choose_kernel, cudnn_shape, cudnn_unavailable
from sidecar.runtime.kernels.ragged import ragged_dims, segment_table
from sidecar.runtime.model import OmniVoiceModel
from sidecar.runtime.options import RuntimeOptions
from sidecar.runtime.runner import ModelRunner
from tests.helpers.packed_batches import CFG

GPU = torch.device("cuda", 0)  # a device object only: nothing here touches a GPU
HEADS = (16, 8, 128)


class Probe:
    """Stands in for `cudnn_unavailable` (which needs a GPU): records its calls."""

    def __init__(self, reason: str | None) -> None:
        self.reason = reason
        self.calls: list[tuple] = []

    def __call__(self, *args: object) -> str | None:
        self.calls.append(args)
        return self.reason


def test_the_default_is_flashattention_2_and_a_bad_name_is_refused() -> None:
    assert RuntimeOptions().attention == "fa2"
    with pytest.raises(ValueError, match="fa2, cudnn"):
        RuntimeOptions(attention="fa3")
    with pytest.raises(ValueError, match="fa2, cudnn"):
        choose_kernel("flashinfer", GPU, torch.bfloat16, HEADS, Probe(None))


def test_cudnn_is_chosen_on_a_gpu_in_half_precision_where_it_can_run() -> None:
    probe = Probe(None)
    assert choose_kernel("cudnn", GPU, torch.bfloat16, HEADS, probe) == "cudnn"
    assert probe.calls == [(GPU, 16, 8, 128, torch.bfloat16)]


@pytest.mark.parametrize(
    ("device", "dtype"),
    [(torch.device("cpu"), torch.bfloat16), (GPU, torch.float32)],
)
def test_off_a_gpu_in_half_precision_attention_runs_per_segment_whatever_was_asked(
    device: torch.device, dtype: torch.dtype
) -> None:
    probe = Probe(None)
    assert choose_kernel("cudnn", device, dtype, HEADS, probe) == "fa2"
    assert probe.calls == []  # nothing probed: the choice does not matter there


def test_a_kernel_that_cannot_run_falls_back_to_flashattention_2_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="sidecar.runtime.attention"):
        got = choose_kernel("cudnn", GPU, torch.float16, HEADS, Probe("no package"))
    assert got == "fa2"
    assert "attention kernel 'cudnn' unavailable (no package): using fa2" in caplog.text
    probe = Probe("never asked")
    assert choose_kernel("fa2", GPU, torch.bfloat16, HEADS, probe) == "fa2"
    assert probe.calls == []


def test_why_cudnn_cannot_run_card_then_package(monkeypatch: pytest.MonkeyPatch) -> None:
    """The card is checked first (cuDNN's packed layout needs Hopper), then the package: here
    it is made unimportable (it is not installed on CI either)."""
    monkeypatch.setitem(sys.modules, "cudnn", None)  # `import cudnn` raises ImportError
    monkeypatch.delitem(sys.modules, "sidecar.runtime.kernels.cudnn_attention", raising=False)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 0))
    assert "compute capability (8, 0) is below (9, 0)" in str(
        cudnn_unavailable(GPU, *HEADS, torch.bfloat16)
    )
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    assert "nvidia-cudnn-frontend cannot be imported" in str(
        cudnn_unavailable(GPU, *HEADS, torch.bfloat16)
    )


def test_cudnn_graph_shapes_round_up_so_that_eager_batches_share_them() -> None:
    """The runtime's graphs (128 segment slots, caps of 256-multiples) keep their shape; an
    eager batch's segments and longest segment round up."""
    assert cudnn_shape(128, 1024) == (128, 1024)
    assert cudnn_shape(128, 4096) == (128, 4096)
    assert cudnn_shape(112, 721) == (128, 768)
    assert cudnn_shape(1, 1) == (attention.SLOT_STEP, attention.CAP_STEP)


def test_a_runner_on_the_cpu_asked_for_cudnn_uses_the_per_segment_path() -> None:
    model = OmniVoiceModel(CFG).eval()
    runner = ModelRunner(model, RuntimeOptions(cuda_graphs=False, attention="cudnn"))
    assert runner.attention_kernel == "fa2"
    assert {layer.self_attn.attention_kernel for layer in model.llm.layers} == {"fa2"}


@pytest.mark.parametrize("graph_input", [False, True])
def test_the_ragged_description_addresses_each_segments_rows(graph_input: bool) -> None:
    """What cuDNN is told (sidecar/runtime/kernels/ragged.py), read back the way cuDNN reads a
    ragged tensor: slot b's element (h, s, d) at its ragged offset plus h, s and d times their
    strides. Every segment's rows come back as they are packed, for q and for the fewer k/v
    heads; the empty slots (an eager call's padding, or a runner graph's) are empty and start
    at the end of the rows."""
    heads, kv_heads, dim, cap, slots = 4, 2, 8, 16, 8
    lens = [5, 16, 1, 9]
    n = sum(lens)
    bounds = [0, *itertools.accumulate(lens)]
    cu = torch.tensor(bounds, dtype=torch.int32)
    if graph_input:  # as a runner's static input holds them: every slot present, the rest at n
        cu = torch.cat([cu, torch.full((slots - len(lens),), n, dtype=torch.int32)])
    row_sizes = torch.tensor([[heads * dim], [kv_heads * dim]], dtype=torch.int64)
    got_lens, q_off, kv_off = segment_table(cu, slots, row_sizes)
    assert got_lens.flatten().tolist() == [*lens, 0, 0, 0, 0]
    for rows, offsets in ((heads, q_off), (kv_heads, kv_off)):
        packed = torch.randn(n, rows, dim)
        _, strides = ragged_dims(slots, rows, cap, dim)
        assert offsets.flatten().tolist() == [b * rows * dim for b in bounds + [n] * 4]
        for b, length in enumerate(lens):
            seen = torch.as_strided(
                packed, (rows, length, dim), strides[1:], int(offsets.flatten()[b])
            )
            assert torch.equal(seen, packed[bounds[b] : bounds[b + 1]].transpose(0, 1))
