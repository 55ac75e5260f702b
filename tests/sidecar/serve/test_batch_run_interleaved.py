"""sidecar/serve/batch_run.py with `--interactive-stream`: a real OmniVoice sidecar (the tiny
fixture checkpoint, on the CPU) denoising a bulk batch takes an interactive batch (tier `interactive`) into
a lane of its own (sidecar/runtime/interleave.py), whose steps are interleaved with the bulk's,
several to one, rather than joining them: it is answered long before the bulk batch, by the
order of the frames (no timers), and the bulk batch loses no step."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sidecar.shared.tiers import Tier
from tests.helpers.null_sidecar import NullSidecar

BULK_ITEMS, BULK_STEPS, JOIN_STEPS = 8, 40, 8


@pytest.fixture(params=["high", "off"])
def sidecar(request: pytest.FixtureRequest, checkpoint_dir: Path) -> Iterator[NullSidecar]:
    flags = ("--engine", "omnivoice", "--model", str(checkpoint_dir), "--step-tokens", "100000")
    s = NullSidecar(*flags, "--interactive-stream", request.param)
    yield s
    with s.proc:
        if s.proc.poll() is None:
            s.proc.kill()


def frames_until_done(sidecar: NullSidecar, batch: int) -> list[dict[str, Any]]:
    frames = [sidecar.read()]
    while frames[-1]["op"] != "done" or frames[-1]["batch"] != batch:
        frames.append(sidecar.read())
    return frames


def test_an_interactive_batch_steps_in_its_own_lane(
    sidecar: NullSidecar, request: pytest.FixtureRequest
) -> None:
    texts = [f"Bulk sentence number {i} goes on for a while." for i in range(BULK_ITEMS)]
    sidecar.generate(1, texts, num_step=BULK_STEPS)
    assert sidecar.read_until("step", batch=1)["step"] == 1
    sidecar.generate(2, ["Answer me now."], num_step=JOIN_STEPS, tier=Tier.INTERACTIVE)
    frames = frames_until_done(sidecar, 2)
    ops = [(f["op"], f.get("batch")) for f in frames]
    assert ("done", 1) not in ops, "the interactive batch waited for the bulk one"
    steps = [f["step"] for f in frames if f["op"] == "step" and f["batch"] == 2]
    assert steps == list(range(1, JOIN_STEPS + 1))
    first, last = ops.index(("step", 2)), len(ops) - 1 - ops[::-1].index(("step", 2))
    bulk_beside = ops[first:last].count(("step", 1))
    if request.node.callspec.id == "high":
        # Its own small steps, several for each bulk step (on the CPU, as many tokens as the
        # bulk's): its eight steps come within two or three of the bulk batch's.
        assert bulk_beside <= 3
    else:  # joined, each of its steps is one of the bulk batch's too
        assert bulk_beside == JOIN_STEPS - 1
    rest = frames_until_done(sidecar, 1)
    bulk_steps = [f["step"] for f in frames + rest if f["op"] == "step" and f["batch"] == 1]
    assert bulk_steps == list(range(2, BULK_STEPS + 1))  # none lost, none repeated
    assert len([f for f in rest if f["op"] == "result"]) == BULK_ITEMS
    assert sidecar.close() == 0


def test_the_next_bulk_batch_starts_while_interactive_work_goes_on(sidecar: NullSidecar) -> None:
    """Bulk batch 1 ends while the long interactive batch 2 still steps: bulk batch 3, which
    waits in the pipe, starts beside it, not once the interactive traffic pauses (under steady
    traffic, never). Its first step comes before batch 2's last, whatever the lane. (Step
    frames come from the frame loop in order; `done` frames from the finishers, later.)"""
    sidecar.generate(1, ["A short bulk sentence.", "And another."], num_step=4)
    assert sidecar.read_until("step", batch=1)["step"] == 1
    texts = [f"Interactive sentence number {i} goes on for a while." for i in range(BULK_ITEMS)]
    sidecar.generate(2, texts, num_step=BULK_STEPS, tier=Tier.INTERACTIVE)
    sidecar.generate(3, ["The next bulk batch."], num_step=4)
    frames = frames_until_done(sidecar, 2)
    if ("done", 3) not in [(f["op"], f.get("batch")) for f in frames]:
        frames += frames_until_done(sidecar, 3)
    steps = [(f["batch"], f["step"]) for f in frames if f["op"] == "step"]
    assert steps.index((3, 1)) < steps.index((2, BULK_STEPS)), "batch 3 waited for batch 2"
    assert steps.index((1, 4)) < steps.index((3, 1))  # in its turn: after batch 1's steps
    assert [s for b, s in steps if b == 3] == [1, 2, 3, 4]
    assert len([f for f in frames if f["op"] == "result" and f["batch"] == 3]) == 1
    assert sidecar.close() == 0
