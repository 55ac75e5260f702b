"""Interactive work in a lane of its own beside the bulk batch (`sidecar.runtime.interleave`), on
the tiny fixture checkpoint, on the CPU, where there are no streams: the interactive steps are
interleaved with the bulk's and hold only interactive members, so a short request added beside a
long bulk batch is done long before it (by the order of their steps, not by timers), and every
item's tokens are those it gives alone."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from pathlib import Path
from types import SimpleNamespace
from typing import ClassVar

import numpy as np
import pytest
import torch

from sidecar.runtime import streams
from sidecar.runtime.interleave import BULK_DEPTH, INTERACTIVE_DEPTH, Interleaved, Lane
from sidecar.runtime.omnivoice import OmniVoice, interactive_options
from sidecar.runtime.options import RuntimeOptions
from sidecar.runtime.request import GenerationRequest
from sidecar.shared.tiers import Tier

BULK_STEPS, SHORT_STEPS = 24, 6


@pytest.fixture(scope="module")
def model(checkpoint_dir: Path) -> OmniVoice:
    return OmniVoice.load(str(checkpoint_dir), options=RuntimeOptions(interactive_stream="high"))


def request(text: str, seed: int, num_step: int) -> GenerationRequest:
    return GenerationRequest(text=text, seed=seed, num_step=num_step)


BULK = [request(f"Bulk sentence number {i} reads on and on.", i, BULK_STEPS) for i in range(4)]
SHORT = request("Answer me now.", 10, SHORT_STEPS)


def alone(model: OmniVoice, req: GenerationRequest) -> list[np.ndarray]:
    [denoised] = model.denoise([req])
    return [t.numpy() for t in denoised.tokens]


def test_a_short_request_beside_a_long_bulk_batch_is_done_long_before_it(
    model: OmniVoice,
) -> None:
    stepper = model.stepper()
    assert isinstance(stepper, Interleaved)
    steps: dict[str, int] = {"bulk": 0, "short": 0}
    bulk_steps_at: dict[str, int] = {}

    def counting(key: str) -> Callable[[int, int], None]:
        def on_step(step: int, num_steps: int) -> None:
            steps[key] = step
            if key == "short" and step == num_steps:
                bulk_steps_at["short done"] = steps["bulk"]

        return on_step

    lanes = model.runner.stats, model.interactive_runner.stats  # type: ignore[union-attr]
    passes = [s.forward_passes for s in lanes]
    assert stepper.add("bulk", BULK, on_step=counting("bulk")) == [None] * len(BULK)
    finished: list[tuple[Hashable, list]] = stepper.step()
    assert stepper.add("short", [SHORT], Tier.INTERACTIVE, counting("short")) == [None]
    while stepper.busy:
        finished += stepper.step()
    # The short request's six steps ran within the bulk batch's first few of 24 ...
    assert [key for key, _ in finished] == ["short", "bulk"]
    assert bulk_steps_at["short done"] <= BULK_STEPS // 4
    # ... each a pass of its own lane, never one of the bulk's (nor the bulk's held to it).
    bulk_passes, short_passes = (s.forward_passes - p for s, p in zip(lanes, passes))
    assert (bulk_passes, short_passes) == (BULK_STEPS, SHORT_STEPS)
    got = {key: [[t.numpy() for t in d.tokens] for d in denoised] for key, denoised in finished}
    for req, tokens in zip([SHORT, *BULK], got["short"] + got["bulk"]):
        for a, b in zip(tokens, alone(model, req), strict=True):
            np.testing.assert_array_equal(a, b)


def test_fresh_interactive_work_needs_no_bulk_step_first(model: OmniVoice) -> None:
    stepper = model.stepper()
    assert isinstance(stepper, Interleaved)
    stepper.add("bulk", BULK[:1])
    stepper.step()
    stepper.step()  # the bulk's second step: the lane's credit is that step's tokens
    stepper.add("short", [SHORT], Tier.INTERACTIVE)
    before = stepper.bulk.stepper.runner.stats.forward_passes
    finished = []
    while not finished:
        finished = stepper.step()
    assert [key for key, _ in finished] == ["short"]
    assert stepper.bulk.stepper.runner.stats.forward_passes - before < SHORT_STEPS
    stepper.abandon()


def test_abandon_drops_both_lanes_oldest_first(model: OmniVoice) -> None:
    stepper = model.stepper()
    assert isinstance(stepper, Interleaved)
    stepper.add("a", BULK[:1])
    stepper.add("b", [SHORT], Tier.INTERACTIVE)
    stepper.add("c", BULK[1:2])
    stepper.step()
    assert stepper.abandon() == ["a", "b", "c"]
    assert not stepper.busy and stepper.credit == 0


def test_the_lane_runner_has_small_graphs_captured_at_its_priority() -> None:
    high = interactive_options(RuntimeOptions(interactive_stream="high"))
    assert max(high.buckets) == 8192 and high.graphs_at_load is None
    assert high.graph_priority == streams.HIGHEST
    assert interactive_options(RuntimeOptions(interactive_stream="equal")).graph_priority == 0


class FakeStream:
    """Stands for `torch.cuda.Stream`, which needs a GPU: it keeps the priority it was made at."""

    def __init__(self, device: torch.device, priority: int = 0) -> None:
        self.device, self.priority = device, priority


def test_the_lane_steps_on_a_stream_of_its_own_not_the_interactive_decodes(
    model: OmniVoice, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The runtime's parts as they are, handed to an OmniVoice that believes it is on a GPU (the
    # streams faked: this machine has none); only the streams it makes are looked at. One stream
    # for both once put the lane's steps behind each interactive batch's decode.
    monkeypatch.setattr(torch.cuda, "Stream", FakeStream)
    on_gpu = OmniVoice(
        model.model,
        model.tokenizer,
        model.codec,
        torch.device("cuda"),
        model.runner,
        model.interactive_runner,
    )
    stepper = on_gpu.stepper()
    assert isinstance(stepper, Interleaved) and stepper.bulk.stream is None
    lane = stepper.interactive.stream
    assert lane is on_gpu.lane_stream and isinstance(lane, FakeStream)
    assert lane.priority == streams.HIGHEST  # its graphs' (`interactive_options`)
    others = (on_gpu.decode_stream, on_gpu.interactive_decode_stream)
    assert all(isinstance(s, FakeStream) and s is not lane for s in others)
    assert on_gpu.interactive_decode_stream.priority == streams.INTERACTIVE_DECODE_PRIORITY  # type: ignore[union-attr]


def test_off_by_default(checkpoint_dir: Path) -> None:
    plain = OmniVoice.load(str(checkpoint_dir))
    assert plain.interactive_runner is None and not isinstance(plain.stepper(), Interleaved)


# ---------------------------------------------------------------- the device's queue, faked
# What cannot run here is a GPU's queue: fake steppers say their runner is on "cuda" and a fake
# event stands for each step queued; the test says when the device has got past them.


class FakeEvent:
    queue: ClassVar[list[FakeEvent]] = []

    def __init__(self) -> None:
        self.reached = False

    def record(self) -> None:
        FakeEvent.queue.append(self)

    def query(self) -> bool:
        return self.reached


def device_runs_all() -> None:
    for event in FakeEvent.queue:
        event.reached = True


class FakeStepper:
    def __init__(self, name: str, tokens: int, log: list[str]) -> None:
        self.name, self.tokens, self.log, self.left = name, tokens, log, 0
        self.runner = SimpleNamespace(device=torch.device("cuda"), stats=SimpleNamespace())
        self.runner.stats.real_tokens = 0

    @property
    def busy(self) -> bool:
        return self.left > 0

    def add(self, key: Hashable, requests: list, interactive: bool, on_step: object) -> list:
        self.left += 100 if self.name == "bulk" else 10
        return [None]

    def step(self) -> list:
        self.left -= 1
        self.runner.stats.real_tokens += self.tokens
        self.log.append(self.name)
        return []

    def abandon(self) -> list[Hashable]:
        self.left = 0
        return []


def test_on_a_gpu_each_lane_keeps_a_short_queue_and_fresh_work_starts_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(FakeEvent, "queue", [])
    log: list[str] = []
    bulk, lane = FakeStepper("bulk", 40_000, log), FakeStepper("lane", 1_000, log)
    stepper = Interleaved(Lane(bulk, None, BULK_DEPTH), Lane(lane, None, INTERACTIVE_DEPTH))  # type: ignore[arg-type]
    stepper.add("bulk", [])
    for _ in range(5):  # the device runs nothing: the host stops at the bulk's depth
        stepper.step()
    assert log == ["bulk"] * BULK_DEPTH
    stepper.add("short", [], Tier.INTERACTIVE)
    stepper.step()  # fresh interactive work steps at once, beside the full bulk queue
    assert log[BULK_DEPTH:] == ["lane"]
    for _ in range(5):
        stepper.step()
    assert log[BULK_DEPTH:] == ["lane"] * INTERACTIVE_DEPTH
    device_runs_all()
    stepper.step()
    stepper.step()  # the interactive lane first, then the bulk as its queue has room
    assert log[BULK_DEPTH + INTERACTIVE_DEPTH :] == ["lane", "lane", "bulk"]
    assert stepper.bulk.pending() == 1 and stepper.interactive.pending() == INTERACTIVE_DEPTH
