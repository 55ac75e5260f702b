"""ModelRunner's bucket choice and padding, on the CPU. CUDA graph capture and replay need a GPU
(not in CI): bench/profile_step.py measures them on the device; here the same staged, padded
inputs run eagerly and must give the real rows' logits unchanged."""

from __future__ import annotations

import dataclasses
import re
import time

import pytest
import torch

from sidecar.runtime.batch import PackedBatch
from sidecar.runtime.generate import Prompt, generate_tokens
from sidecar.runtime.model import OmniVoiceModel
from sidecar.runtime.options import RuntimeOptions
from sidecar.runtime.regions import RegionalStack
from sidecar.runtime.runner import ModelRunner
from tests.helpers.packed_batches import CFG, batch_of, forward_args, prompts_of


@pytest.fixture(scope="module")
def model() -> OmniVoiceModel:
    torch.manual_seed(0)
    return OmniVoiceModel(CFG).eval()


@pytest.mark.parametrize(
    "tokens,segments,longest,expected",
    [
        (100, 2, 60, (128, 64)),
        (128, 2, 60, (128, 64)),
        (129, 2, 60, (256, 64)),
        (1000, 2, 60, None),
        (100, 10, 60, None),
        (100, 2, 64, (128, 64)),
        (100, 2, 65, (128, 128)),
        (100, 2, 129, (256, 256)),
        (300, 2, 65, (512, 256)),
        (100, 2, 257, None),
    ],
)
def test_bucket_and_attention_cap_choice(
    model: OmniVoiceModel,
    tokens: int,
    segments: int,
    longest: int,
    expected: tuple[int, int] | None,
) -> None:
    """The smallest bucket that holds the batch, then the tightest attention cap of that bucket
    that holds its longest segment: buckets above the short cap have it and their own cap
    (itself, or the longest cap); none holds a segment above the longest cap."""
    runner = ModelRunner(
        model,
        RuntimeOptions(buckets=(128, 256, 512), cuda_graphs=False),
        max_segments=9,
        max_segment_len=256,
        short_segment_len=64,
    )
    assert [runner.segment_caps(n) for n in (32, 128, 256, 512)] == [
        [32],
        [64, 128],
        [64, 256],
        [64, 256],
    ]
    found = runner.bucket_for(tokens, segments, longest)
    assert ((found[0].num_tokens, found[1]) if found else None) == expected


def staged_logits(runner: ModelRunner, batch: PackedBatch) -> torch.Tensor:
    """Stage a batch into its bucket and run the bucket's forward pass (what a graph replays)."""
    found = runner.bucket_for(batch.num_tokens, len(batch.segment_lens), batch.max_seqlen)
    assert found is not None
    bucket, cap = found
    args = (batch.input_ids, batch.audio_mask, batch.positions, batch.cu_seqlens)
    runner.stage(bucket, *args, batch.head_index)
    runner._run(bucket, cap)
    return runner.model.head(runner.hidden_out[: batch.head_index.numel()])


def test_padded_bucket_gives_the_same_logits(model: OmniVoiceModel) -> None:
    batch = batch_of([(30, 10, 12), (17, 5, 9), (40, 20, 8)])
    with torch.inference_mode():
        want = model.forward_packed(*forward_args(batch))
        runner = ModelRunner(
            model,
            RuntimeOptions(buckets=(256,), cuda_graphs=False),
            max_segments=12,
            max_segment_len=256,
        )
        got = staged_logits(runner, batch)
    assert runner.buckets[256].inputs["cu_seqlens"].tolist() == batch.cu_seqlens.tolist() + [
        batch.num_tokens
    ] * (12 - len(batch.segment_lens))
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def staging_ops(runner: ModelRunner, batch: PackedBatch) -> int:
    """How many copies and fills one `stage` call makes (on the GPU, each is a launch)."""
    found = runner.bucket_for(batch.num_tokens, len(batch.segment_lens), batch.max_seqlen)
    assert found is not None
    args = (batch.input_ids, batch.audio_mask, batch.positions, batch.cu_seqlens)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        runner.stage(found[0], *args, batch.head_index)
    return sum(e.count for e in prof.key_averages() if e.key in ("aten::copy_", "aten::fill_"))


def test_a_batchs_later_steps_stage_only_their_input_ids(model: OmniVoiceModel) -> None:
    """A batch's steps share its layout (mask, positions, segments, head rows), so only the
    first stages it; a step's new input ids still reach the bucket, and another batch staged in
    between makes the first stage its layout again, in full."""
    a = batch_of([(30, 10, 12), (17, 5, 9)])
    b = batch_of([(25, 8, 10), (40, 20, 8), (12, 4, 5)])
    runner = ModelRunner(model, RuntimeOptions(buckets=(256,), cuda_graphs=False), max_segments=12)
    with torch.inference_mode():
        first = staging_ops(runner, a)
        later = staging_ops(runner, a)
        assert later == 1 < first, (first, later)
        a.input_ids[:, a.head_index[0]] = 7  # a step reveals a token
        want_a = model.forward_packed(*forward_args(a))
        torch.testing.assert_close(staged_logits(runner, a), want_a, rtol=1e-5, atol=1e-5)
        want_b = model.forward_packed(*forward_args(b))
        torch.testing.assert_close(staged_logits(runner, b), want_b, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(staged_logits(runner, a), want_a, rtol=1e-5, atol=1e-5)
        assert staging_ops(runner, a) == 1


def test_without_graphs_the_runner_is_the_plain_forward(model: OmniVoiceModel) -> None:
    batch = batch_of([(20, 6, 7)])
    runner = ModelRunner(model, RuntimeOptions(buckets=(64,), cuda_graphs=False))
    with torch.inference_mode():
        got = runner.forward(*forward_args(batch))
        want = model.forward_packed(*forward_args(batch))
    assert torch.equal(got, want)
    assert (
        runner.stats.graph_hits == 0
        and runner.stats.graph_misses == 0
        and runner.stats.real_tokens == batch.num_tokens
    )


def test_compiled_stack_rounds_as_eager_does(model: OmniVoiceModel) -> None:
    """The runner's compiled layer stack rounds its intermediates to bf16 where eager PyTorch
    does (regions.EAGER_ROUNDING): its hidden states differ from eager's in far fewer places
    than with Inductor's default (float32 kept between fused operations), built here. On
    Inductor's CPU backend; bench/fidelity.py measures the logits on the GPU."""
    bf16 = OmniVoiceModel(CFG).eval().to(torch.bfloat16)
    bf16.load_state_dict(model.state_dict())
    batch = batch_of([(30, 10, 12), (17, 5, 9), (40, 20, 8)])
    args = forward_args(batch)
    differing = {}
    with torch.inference_mode():
        eager = bf16.hidden_packed(*args).float()
        for rounding in (True, False):
            torch._dynamo.reset()
            stack = ModelRunner(bf16, RuntimeOptions(cuda_graphs=False, compile=True)).stack_fn
            if not rounding:
                stack = RegionalStack(bf16, {"emulate_precision_casts": False})
            got = bf16.hidden_packed(*args, stack=stack).float()
            differing[rounding] = float((got != eager).float().mean())
    torch._dynamo.reset()
    assert differing[True] < 0.75 * differing[False], differing


def test_rotary_tables_are_made_outside_the_compiled_stack(model: OmniVoiceModel) -> None:
    """The compiled part of the forward takes the rotary tables as inputs. Compiled together with
    them, Inductor folds their cos and sin into each layer's q/k kernel and computes them again
    for every head of every layer: 6 of 81 ms of a forward pass at 64 items on an H200
    (bench/results/2026-12-01-rope-tables.json). Here the generated code (Inductor's CPU backend)
    is read for any cos or sin call, and the result checked against the eager forward."""
    from torch._inductor.utils import run_and_get_code

    args = forward_args(batch_of([(30, 10, 12), (17, 5, 9)]))
    torch._dynamo.reset()
    runner = ModelRunner(model, RuntimeOptions(cuda_graphs=False, compile=True))
    with torch.inference_mode():
        got, code = run_and_get_code(runner.hidden_fn, *args)
        want = model.hidden_packed(*args)
    torch._dynamo.reset()
    assert code, "nothing was compiled"
    assert not re.findall(r"\b(?:cos|sin)\(", "\n".join(code))
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_the_runner_times_each_batch_and_the_gap_before_it(model: OmniVoiceModel) -> None:
    """generate_tokens ends each batch with ModelRunner.end_batch; `settle` then adds up the
    forward passes' time, the batch's (first forward pass to the end of its last step, so at
    least its passes) and the gap since the previous batch ended (here at least the pause
    between the two calls), and returns what it added. The host's clock on the CPU, where every
    batch is settled at once; CUDA events on a GPU (next test)."""
    runner = ModelRunner(model, RuntimeOptions(cuda_graphs=False))
    prompts = [
        Prompt(ids, audio_start, target_len, num_step=4, seed=seed)
        for seed, (ids, audio_start, target_len) in enumerate(
            prompts_of([(30, 10, 12), (17, 5, 9)])
        )
    ]
    generate_tokens(model, prompts, runner=runner)
    added = runner.settle()
    first = dataclasses.replace(runner.stats)
    assert first.forward_passes == 4 and 0 < first.forward_s <= first.batch_s
    assert first.gap_s == 0  # no batch before the first
    assert added == {"forward_s": first.forward_s, "batch_s": first.batch_s, "gap_s": 0.0}
    assert runner.settle() == dict.fromkeys(added, 0.0)  # reported once
    time.sleep(0.05)  # a gap between two batches: the gap_s measured next
    generate_tokens(model, prompts, runner=runner)
    runner.settle()
    second = runner.stats
    assert second.gap_s >= 0.05
    assert second.batch_s - first.batch_s >= second.forward_s - first.forward_s > 0


class FakeDevice:
    """Stands in for the GPU's timeline (CI has no GPU): the runner's marks become events in
    recording order, and the test says how far the device has got through them."""

    def __init__(self) -> None:
        self.events: list[FakeEvent] = []
        self.reached = 0  # events before this index are done
        self.waited = False

    def mark(self) -> FakeEvent:
        event = FakeEvent(self, len(self.events), time.perf_counter())
        self.events.append(event)
        return event


@dataclasses.dataclass
class FakeEvent:
    device: FakeDevice
    index: int
    at: float

    def query(self) -> bool:
        return self.index < self.device.reached

    def synchronize(self) -> None:
        self.device.waited = True
        self.device.reached = max(self.device.reached, self.index + 1)

    def elapsed_time(self, end: FakeEvent) -> float:
        return (end.at - self.at) * 1000.0


def test_a_batch_is_timed_once_the_device_is_past_it_and_never_waited_for(
    model: OmniVoiceModel,
) -> None:
    """On a GPU, ending a batch does not wait for the device (the host goes on to prepare the
    next one); `settle` reads the batches the device has finished, oldest first, and with
    `wait` the rest."""
    runner = ModelRunner(model, RuntimeOptions(cuda_graphs=False))
    device = FakeDevice()
    runner._mark = device.mark  # type: ignore[method-assign]
    prompts = [Prompt(*prompts_of([(30, 10, 12)])[0], num_step=3, seed=1)]
    generate_tokens(model, prompts, runner=runner)
    first_end = len(device.events) - 1
    generate_tokens(model, prompts, runner=runner)
    assert not device.waited  # neither batch's end made the host wait
    assert runner.settle() == {"forward_s": 0.0, "batch_s": 0.0, "gap_s": 0.0}
    assert runner.stats.forward_s == 0  # the device has finished nothing yet

    device.reached = first_end + 1  # through the first batch only
    first = runner.settle()
    assert 0 < first["forward_s"] <= first["batch_s"] and first["gap_s"] == 0
    assert runner.stats.forward_s == first["forward_s"]
    assert not device.waited

    second = runner.settle(wait=True)
    assert device.waited and 0 < second["forward_s"] <= second["batch_s"]
    assert second["gap_s"] > 0  # from the first batch's end to the second's first pass
    assert runner.stats.batch_s == first["batch_s"] + second["batch_s"]


def test_graphs_are_recorded_at_the_options_priority(model: OmniVoiceModel) -> None:
    # A graph's kernels keep the priority of the stream that captured it (no GPU here: the
    # recorder's setting is what the capture stream is made with).
    assert ModelRunner(model, RuntimeOptions(cuda_graphs=False)).recorder.priority == 0
    runner = ModelRunner(model, RuntimeOptions(cuda_graphs=False, graph_priority=-5))
    assert runner.recorder.priority == -5
