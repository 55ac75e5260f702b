"""Graphs captured at a bucket's first batch (RuntimeOptions.graphs_at_load), on the CPU.

Recording a CUDA graph needs a GPU (not in CI): `Recorder.record` is replaced by a stand-in
whose graph replays the pass it was given, so what is tested is the runner's side: which
buckets wait, that a bucket's first pass runs at its shapes and gives the batch's logits, that
its graph then serves the passes after it, and that a capture that fails costs the graph only.
bench/start_arm.py measures the start on the device.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable

import pytest
import torch

from sidecar.runtime.capture import Recorder, StartTimes, compile_phases
from sidecar.runtime.model import OmniVoiceModel
from sidecar.runtime.options import RuntimeOptions
from sidecar.runtime.runner import ModelRunner
from tests.helpers.packed_batches import CFG, batch_of, forward_args


class StandInGraph:
    """What a CUDA graph does here: replay the recorded pass (each replay counted)."""

    def __init__(self, run: Callable[[], None], replays: list[int]) -> None:
        self.run, self.replays = run, replays

    def replay(self) -> None:
        self.replays.append(1)
        self.run()

    def pool(self) -> None:
        return None


@pytest.fixture(scope="module")
def model() -> OmniVoiceModel:
    torch.manual_seed(0)
    return OmniVoiceModel(CFG).eval()


def runner_with_late_graphs(
    model: OmniVoiceModel, monkeypatch: pytest.MonkeyPatch, fail: bool = False
) -> tuple[ModelRunner, list[int], list[int]]:
    """A runner whose buckets all wait for their first batch, graphs standing in for CUDA's."""
    runner = ModelRunner(
        model,
        RuntimeOptions(buckets=(128, 256), graphs_at_load=64, cuda_graphs=False),
        max_segments=12,
        max_segment_len=256,
        short_segment_len=64,
    )
    runner.use_graphs = True  # what a GPU in half precision resolves to
    recorded: list[int] = []
    replays: list[int] = []

    def record(run: Callable[[], None]) -> StandInGraph:
        recorded.append(1)
        if fail:
            raise RuntimeError("operation not permitted when stream is capturing")
        return StandInGraph(run, replays)

    monkeypatch.setattr(runner.recorder, "record", record)
    return runner, recorded, replays


def test_a_bucket_waits_for_its_first_batch_then_replays_its_graph(
    model: OmniVoiceModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner, recorded, replays = runner_with_late_graphs(model, monkeypatch)
    assert not any(runner._at_load(n) for n in runner.bucket_sizes)
    batch = batch_of([(30, 10, 12), (17, 5, 9), (40, 20, 8)])  # 87 tokens: bucket 128, cap 64
    other = batch_of([(25, 8, 10), (31, 12, 9)])  # the same bucket and cap, another batch
    with torch.inference_mode():
        want = [model.forward_packed(*forward_args(b)) for b in (batch, other, batch)]
        got = [runner.forward(*forward_args(b)) for b in (batch, other, batch)]
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)
    assert recorded == [1] and replays == [1, 1]  # captured after the first; replayed twice
    assert set(runner.buckets[128].graphs) == {64}
    stats = runner.stats
    assert (stats.graph_misses, stats.graph_hits, stats.late_captures) == (1, 2, 1)
    assert stats.padded_tokens == 3 * 128 and stats.late_capture_s > 0


def test_a_capture_that_fails_leaves_the_bucket_running_without_a_graph(
    model: OmniVoiceModel, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The batch is answered either way; the failed capture is not tried again."""
    runner, recorded, replays = runner_with_late_graphs(model, monkeypatch, fail=True)
    batch = batch_of([(30, 10, 12), (17, 5, 9)])
    with torch.inference_mode(), caplog.at_level(logging.WARNING):
        want = model.forward_packed(*forward_args(batch))
        got = [runner.forward(*forward_args(batch)) for _ in range(3)]
    for g in got:
        torch.testing.assert_close(g, want, rtol=1e-5, atol=1e-5)
    assert recorded == [1] and replays == []
    assert runner.buckets[128].graphs == {} and runner.buckets[128].uncapturable == {64}
    assert (runner.stats.graph_misses, runner.stats.late_captures) == (3, 0)
    assert caplog.text.count("no CUDA graph for bucket 128 (cap 64): RuntimeError") == 1


def test_which_buckets_get_their_graphs_at_load(model: OmniVoiceModel) -> None:
    def at_load(limit: int | None) -> list[int]:
        options = RuntimeOptions(buckets=(128, 256, 512), graphs_at_load=limit, cuda_graphs=False)
        runner = ModelRunner(model, options)
        return [n for n in runner.bucket_sizes if runner._at_load(n)]

    assert at_load(None) == [128, 256, 512]
    assert at_load(256) == [128, 256]
    assert at_load(100) == []
    assert RuntimeOptions().graphs_at_load == 4096  # single requests and small batches


def test_the_start_line_says_where_the_time_went(caplog: pytest.LogCaptureFixture) -> None:
    recorder = Recorder()
    recorder.times = StartTimes(compile_s=12.34, warmup_s=1.5, record_s=0.25, graphs=16)
    with caplog.at_level(logging.INFO):
        recorder.report(14.2, [5120, 65536], compiled=False)
        recorder.report(14.2, [], compiled=False)
    first, second = (r.getMessage() for r in caplog.records)
    assert first == (
        "captured 16 CUDA graphs in 14.2 s (first pass (compilation) 12.3 s, other warm-up "
        "passes 1.5 s, recording 0.2 s); at their first batch: buckets 5120,65536; "
        "torch.compile: off"
    )
    assert "at their first batch: none;" in second


def test_the_compile_phases_line_names_what_torch_compile_timed() -> None:
    """Dynamo's own trace (no Inductor: the eager backend, fast on the CPU) shows as a phase."""
    traced = torch.compile(lambda x: x * 2 + 1, backend="eager", dynamic=True)
    assert torch.equal(traced(torch.ones(3)), torch.full((3,), 3.0))
    assert re.search(r"dynamo tracing \d+\.\d s", compile_phases()), compile_phases()
