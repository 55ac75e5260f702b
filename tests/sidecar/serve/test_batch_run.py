"""sidecar/serve/batch_run.py: an interactive batch (`join`) that arrives while a bulk batch
denoises joins it at its next step, and is answered before it.

A real null-engine sidecar on real pipes; a `slow` fault makes the bulk batch take seconds
(every step of it sleeps), so where its steps go is visible in the frames."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from sidecar.shared.tiers import Tier
from tests.helpers.null_sidecar import NullSidecar

BULK = "A bulk sentence, read slowly. [[fault:slow:6]]"
BULK_STEPS = 60  # 0.1 s a step: the joined batch comes well before its end


@pytest.fixture(params=["0", "100000"], ids=["bulk-paused", "bulk-beside"])
def sidecar(request: pytest.FixtureRequest) -> Iterator[NullSidecar]:
    s = NullSidecar("--step-tokens", request.param)
    yield s
    with s.proc:
        if s.proc.poll() is None:
            s.proc.kill()


def frames_until_done(sidecar: NullSidecar, *batches: int) -> list[dict[str, Any]]:
    """Every frame up to the last `done` of these batches (in whichever order they end)."""
    frames: list[dict[str, Any]] = []
    waiting = set(batches)
    while waiting:
        frames.append(sidecar.read())
        if frames[-1]["op"] == "done":
            waiting.discard(frames[-1]["batch"])
    return frames


def test_an_interactive_batch_joins_at_a_step_and_is_answered_first(
    sidecar: NullSidecar, request: pytest.FixtureRequest
) -> None:
    sidecar.generate(1, [BULK], num_step=BULK_STEPS)
    assert sidecar.read_until("step", batch=1)["step"] == 1
    sidecar.generate(2, ["Answer me now.", "And me."], num_step=4, tier=Tier.INTERACTIVE)
    frames = frames_until_done(sidecar, 2)
    ops = [(f["op"], f.get("batch")) for f in frames]
    assert ("done", 1) not in ops, "the joined batch waited for the bulk one"
    assert [f["id"] for f in frames if f["op"] == "result"] == ["b2-0", "b2-1"]
    assert [f["step"] for f in frames if f["op"] == "step" and f["batch"] == 2] == [1, 2, 3, 4]
    # Its steps: bulk ones among them only when the bulk batch may run beside it.
    first, last = ops.index(("step", 2)), ops.index(("result", 2))
    bulk_beside = ("step", 1) in ops[first:last]
    assert bulk_beside == (request.node.callspec.id == "bulk-beside")
    rest = frames_until_done(sidecar, 1)
    bulk_steps = [f["step"] for f in frames + rest if f["op"] == "step" and f["batch"] == 1]
    assert bulk_steps == list(range(2, BULK_STEPS + 1))  # none lost, none repeated
    assert [f["id"] for f in rest if f["op"] == "result"] == ["b1-0"]
    assert sidecar.close() == 0


def test_a_batch_without_join_waits_for_the_running_one(sidecar: NullSidecar) -> None:
    sidecar.generate(1, [BULK], num_step=BULK_STEPS)
    sidecar.read_until("step", batch=1)
    sidecar.generate(2, ["Next in line."])
    frames = frames_until_done(sidecar, 1) + frames_until_done(sidecar, 2)
    steps = [f["batch"] for f in frames if f["op"] == "step"]
    # Every remaining step of batch 1 before the first of batch 2 (which may then denoise
    # while batch 1 decodes: that is the pipelining, not a join).
    assert steps == [1] * (BULK_STEPS - 1) + [2] * 4


def test_a_step_that_fails_in_a_joined_batch_fails_that_item_alone(sidecar: NullSidecar) -> None:
    """The failing step ends the stretch; each batch runs again on its own, the joined one
    split until its failing item stands alone, and every other item gets its audio."""
    sidecar.generate(1, ["Bulk, a little slowly. [[fault:slow:1]]"], num_step=20)
    sidecar.read_until("step", batch=1)
    sidecar.generate(2, ["Fine.", "Broken. [[fault:raise]]"], num_step=4, tier=Tier.INTERACTIVE)
    # Run again apart, either batch may end first.
    frames = frames_until_done(sidecar, 1, 2)
    answers = {f["id"]: f["op"] for f in frames if f["op"] in ("result", "error")}
    assert answers == {"b2-0": "result", "b2-1": "error", "b1-0": "result"}
    assert sidecar.close() == 0
