"""Continuous batching (`sidecar.runtime.stepper`) on the tiny fixture checkpoint, on the CPU:
requests that join a running batch at a later step, bulk members paused for interactive ones,
and a long request's later chunks joining once its chunk 0 is done, each give the tokens the
same request gives in a batch of its own."""

from __future__ import annotations

from collections.abc import Hashable
from pathlib import Path

import numpy as np
import pytest
import torch

from sidecar.runtime.omnivoice import OmniVoice
from sidecar.runtime.request import GenerationRequest
from sidecar.runtime.stepper import Denoised, Stepper, run_to_end
from sidecar.shared.tiers import Tier

STEPS = 6  # a few steps keep the CPU's work small; the joins happen at step 2


@pytest.fixture(scope="module")
def model(checkpoint_dir: Path) -> OmniVoice:
    return OmniVoice.load(str(checkpoint_dir))


def request(text: str, seed: int, **options: float) -> GenerationRequest:
    return GenerationRequest(text=text, seed=seed, num_step=STEPS, **options)  # type: ignore[arg-type]


BULK = [request(f"Bulk sentence number {i} reads on.", seed=i) for i in range(4)]
URGENT = [request("Answer me now.", seed=10), request("And me too, please.", seed=11)]
LONG = request(
    " ".join(["A long sentence that goes on and on for a while."] * 6),
    seed=12,
    audio_chunk_threshold=3.0,
    audio_chunk_duration=2.0,
)


def alone(model: OmniVoice, req: GenerationRequest) -> list[torch.Tensor]:
    [denoised] = model.denoise([req])
    return denoised.tokens


def tokens_of(
    finished: list[tuple[Hashable, list[Denoised]]],
) -> dict[Hashable, list[list[torch.Tensor]]]:
    return {key: [d.tokens for d in denoised] for key, denoised in finished}


def assert_same(got: list[torch.Tensor], want: list[torch.Tensor]) -> None:
    assert len(got) == len(want)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def join_at_step_2(stepper: Stepper, urgent: list[GenerationRequest]) -> list:
    assert stepper.add("bulk", BULK) == [None] * len(BULK)
    finished = stepper.step() + stepper.step()
    assert stepper.add("urgent", urgent, tier=Tier.INTERACTIVE) == [None] * len(urgent)
    return finished + run_to_end(stepper)


@pytest.mark.parametrize("step_tokens", [1, 10**6], ids=["bulk-paused", "bulk-beside"])
def test_requests_joining_at_a_later_step_give_the_tokens_they_give_alone(
    model: OmniVoice, step_tokens: int
) -> None:
    stepper = model.stepper(step_tokens)
    finished = join_at_step_2(stepper, URGENT)
    order = [key for key, _ in finished]
    # Paused, the bulk batch waits for the interactive one, which ends first; beside it, the
    # bulk batch started two steps earlier and ends first.
    assert order == (["urgent", "bulk"] if step_tokens == 1 else ["bulk", "urgent"])
    got = tokens_of(finished)
    for req, tokens in zip(BULK, got["bulk"]):
        assert_same(tokens, alone(model, req))
    for req, tokens in zip(URGENT, got["urgent"]):
        assert_same(tokens, alone(model, req))
    assert not stepper.busy and stepper.state is None
    # Made in inference mode, as the runner's graphs (captured in it) need on a GPU.
    assert all(t.is_inference() for tokens in got.values() for chunks in tokens for t in chunks)


def test_a_budget_runs_some_bulk_members_beside_an_interactive_one(model: OmniVoice) -> None:
    """With room for the interactive member and two bulk ones, the other two bulk members wait:
    the first two finish before them, and every member's tokens are still its own."""
    probe = model.stepper()
    probe.add("x", [URGENT[0], BULK[0], BULK[1]])
    room = sum(m.cost for m in probe.members)
    stepper = model.stepper(room)
    stepper.add("bulk", BULK)
    stepper.step()
    stepper.add("urgent", URGENT[:1], tier=Tier.INTERACTIVE)
    chosen = stepper._choose()
    assert [(m.group.key, m.item) for m in chosen] == [("bulk", 0), ("bulk", 1), ("urgent", 0)]
    finished = run_to_end(stepper)
    got = tokens_of(finished)
    for req, tokens in zip(BULK, got["bulk"]):
        assert_same(tokens, alone(model, req))
    assert_same(got["urgent"][0], alone(model, URGENT[0]))


def test_a_long_request_joins_and_its_later_chunks_follow_its_chunk_0(model: OmniVoice) -> None:
    stepper = model.stepper(1)
    finished = join_at_step_2(stepper, [LONG])
    got = tokens_of(finished)
    assert len(got["urgent"][0]) > 1  # chunked: chunks 1.. cloned chunk 0 in a second round
    assert_same(got["urgent"][0], alone(model, LONG))


def test_an_invalid_request_is_refused_alone_and_the_rest_run(model: OmniVoice) -> None:
    stepper = model.stepper()
    bad = GenerationRequest(text="   ", seed=1, num_step=STEPS)
    refused = stepper.add("mixed", [BULK[0], bad])
    assert refused[0] is None and "empty" in str(refused[1])
    [(key, denoised)] = run_to_end(stepper)
    assert key == "mixed" and len(denoised) == 1
    assert stepper.add("none", [bad])[0] is not None and not stepper.busy


def test_abandon_drops_every_group(model: OmniVoice) -> None:
    stepper = model.stepper()
    stepper.add("a", BULK[:1])
    stepper.step()
    stepper.add("b", URGENT[:1], tier=Tier.INTERACTIVE)
    assert stepper.abandon() == ["a", "b"]
    assert not stepper.busy and not stepper.members


def test_members_that_end_ride_along_until_the_members_change(model: OmniVoice) -> None:
    """The bulk batch ends two steps before the request that joined it: its members stay in
    the batch state, revealing nothing, so their leaving builds no new state (the host would
    prepare it while the device waits); the tokens stay each request's own, and a group that
    ended is told of no step after its last."""
    stepper = model.stepper(10**6)
    steps: dict[str, list[int]] = {"bulk": [], "urgent": []}
    stepper.add("bulk", BULK, on_step=lambda step, of: steps["bulk"].append(step))
    finished = stepper.step() + stepper.step()
    stepper.add(
        "urgent",
        URGENT,
        tier=Tier.INTERACTIVE,
        on_step=lambda step, of: steps["urgent"].append(step),
    )
    finished += run_to_end(stepper)
    assert [key for key, _ in finished] == ["bulk", "urgent"]
    assert stepper.builds == 2  # the bulk batch's, then the join's; none when the bulk ended
    assert steps == {"bulk": list(range(1, STEPS + 1)), "urgent": list(range(1, STEPS + 1))}
    got = tokens_of(finished)
    for req, tokens in zip(URGENT, got["urgent"]):
        assert_same(tokens, alone(model, req))
    assert stepper.state is None and not stepper.busy  # released once every member ended


class DeviceEvent:
    """Stands in for torch.cuda.Event (CI has no GPU): notes when it is recorded and waited on."""

    def __init__(self, log: list[tuple[str, int]]) -> None:
        self.log = log
        self.number = sum(1 for kind, _ in log if kind == "record") + 1

    def record(self) -> None:
        self.log.append(("record", self.number))

    def synchronize(self) -> None:
        self.log.append(("wait", self.number))


def test_with_an_interactive_member_the_host_queues_at_most_its_bound(model: OmniVoice) -> None:
    log: list[tuple[str, int]] = []
    stepper = model.bulk_stepper(10**6, queued_steps=2)
    stepper.new_event = lambda: DeviceEvent(log)  # type: ignore[assignment,return-value]
    built_s = stepper.runner.stats.build_s
    stepper.add("bulk", BULK[:2])
    stepper.step()
    stepper.step()
    assert log == []  # bulk members alone: the host runs ahead unbounded
    stepper.add("urgent", URGENT[:1], tier=Tier.INTERACTIVE)
    for _ in range(4):
        stepper.step()
    # After each step an event; once more than two are queued, the host waits for the oldest.
    waits = [("wait", 1), ("wait", 2)]
    assert log == [("record", 1), ("record", 2), ("record", 3), waits[0], ("record", 4), waits[1]]
    run_to_end(stepper)
    assert len(stepper.queued) == 2
    assert stepper.runner.stats.build_s > built_s  # the host's time building, reported


def test_on_the_cpu_and_without_a_bound_nothing_is_queued(model: OmniVoice) -> None:
    paced = model.stepper()  # as served: bounded, but the CPU has run each step already
    assert isinstance(paced, Stepper) and paced.queued_steps == 2 and paced.new_event is None
    unbounded = model.bulk_stepper(10**6)
    unbounded.new_event = lambda: pytest.fail("an event without a bound")  # type: ignore[assignment,return-value]
    unbounded.add("urgent", URGENT[:1], tier=Tier.INTERACTIVE)
    run_to_end(unbounded)
    assert not unbounded.queued
