"""Interactive work beside a bulk batch, never in its steps (`RuntimeOptions.interactive_stream`).

Two `Stepper`s, each on a runner of its own (its CUDA graphs, static inputs, memory pool and
output buffer, so that two replays never share a buffer): the bulk one, whose steps hold every
bulk member at full size (no step budget: it holds no interactive member), and the interactive
one, whose small steps hold only interactive members. On a GPU each steps on a CUDA stream of
its own, so the device's scheduler, not the step, decides who waits: the interactive stream at
the bulk's priority or the device's highest (its graphs captured there, since a graph's kernels
keep the priority of the stream that captured it).

Both are driven from one host loop, the frame loop's thread (a second Python thread would share
the interpreter's lock with it, and `bench/two_streams.py` finds it buys nothing). Each `step`
runs the lane steps that are due:

- a lane is due while it has work and fewer than its `depth` steps are still queued on the
  device (an event after each), so the host never blocks in a launch into a full queue and can
  always start an interactive step at once;
- the interactive lane goes first while the tokens it ran since the bulk's last step are fewer
  than that step's (its credit). On the CPU, where nothing stays queued, the interactive lane so
  gets as many tokens as the bulk, many small steps per bulk step, never held to the bulk's
  size; on a GPU the queue depth is what paces it.

When nothing is due, the host polls the oldest queued step for a moment and returns, so that the
caller can take in new work between two polls. An item's tokens are the same whatever it ran
beside: nothing a member computes depends on the others (`sidecar.runtime.stepper`).
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

import torch

from sidecar.runtime.request import GenerationRequest
from sidecar.runtime.stepper import Denoised, StepCallback, Stepper
from sidecar.shared.tiers import Tier

# Steps queued ahead on the device, per lane: two keep the device busy while the host prepares
# the next, and the host free, since a launch into a full device queue blocks (a full-size
# step's graph fills much of it) and an interactive step would wait behind that launch.
BULK_DEPTH = 2
INTERACTIVE_DEPTH = 2
POLL_S = 0.001  # how long a `step` with nothing due waits for a queued step to end
POLL_INTERVAL_S = 0.0002

Finished = list[tuple[Hashable, list[Denoised]]]


@dataclass
class Lane:
    """One stepper, the stream it steps on (None: the thread's current one), and the events
    after its steps that the device has not reached yet."""

    stepper: Stepper
    stream: torch.cuda.Stream | None
    depth: int
    queued: deque[torch.cuda.Event] = field(default_factory=deque)

    def pending(self) -> int:
        while self.queued and self.queued[0].query():
            self.queued.popleft()
        return len(self.queued)

    def due(self) -> bool:
        return self.stepper.busy and self.pending() < self.depth

    def step(self) -> tuple[Finished, int]:
        """One step on the lane's stream: the groups it finished, and its tokens."""
        stats = self.stepper.runner.stats
        before = stats.real_tokens
        on_gpu = self.stepper.runner.device.type == "cuda"
        stream = torch.cuda.stream(self.stream) if self.stream is not None else None
        with stream or contextlib.nullcontext():
            finished = self.stepper.step()
            if on_gpu:
                event = torch.cuda.Event()
                event.record()
                self.queued.append(event)
        return finished, stats.real_tokens - before


class Interleaved:
    """The bulk and the interactive lane, with `Stepper`'s surface: `add` requests (interactive
    ones to the interactive lane), then `step` until not `busy`."""

    def __init__(self, bulk: Lane, interactive: Lane) -> None:
        self.bulk, self.interactive = bulk, interactive
        self.credit = 0  # tokens the interactive lane may run before the bulk's next step
        self.bulk_tokens = 0  # the bulk's last step's
        self.added: dict[Hashable, int] = {}  # each group's key, in the order added

    @property
    def busy(self) -> bool:
        return self.bulk.stepper.busy or self.interactive.stepper.busy

    @property
    def holds_bulk(self) -> bool:
        return self.bulk.stepper.busy

    def add(
        self,
        key: Hashable,
        requests: Sequence[GenerationRequest],
        tier: Tier = Tier.BULK,
        on_step: StepCallback | None = None,
    ) -> list[Exception | None]:
        """`Stepper.add`, on the interactive lane for interactive requests, else the bulk's."""
        self.added[key] = len(self.added)
        interactive = tier is Tier.INTERACTIVE
        lane = self.interactive if interactive else self.bulk
        if interactive and not lane.stepper.busy:  # fresh work need not wait for a bulk step
            self.credit = max(self.credit, self.bulk_tokens)
        return lane.stepper.add(key, requests, tier, on_step)

    def step(self) -> Finished:
        """The lane steps that are due (see the module's docstring); the groups they finished."""
        finished: Finished = []
        ran = False
        if self._interactive_due():
            done, tokens = self.interactive.step()
            finished, ran = done, True
            self.credit -= tokens
        if self.bulk.due() and not self._interactive_due():
            done, tokens = self.bulk.step()
            finished, ran = finished + done, True
            self.credit = self.bulk_tokens = tokens
        if not ran:
            self._poll()
        return finished

    def _interactive_due(self) -> bool:
        return self.interactive.due() and (self.credit > 0 or not self.bulk.stepper.busy)

    def _poll(self) -> None:
        """Wait a moment for the oldest queued step of a busy lane, the interactive one's first."""
        lane = next((x for x in (self.interactive, self.bulk) if x.stepper.busy and x.queued), None)
        if lane is None:
            return
        deadline = time.monotonic() + POLL_S
        while not lane.queued[0].query() and time.monotonic() < deadline:
            time.sleep(POLL_INTERVAL_S)

    def abandon(self) -> list[Hashable]:
        """Drop every group of both lanes (after a failed step): their keys, oldest first."""
        keys = self.bulk.stepper.abandon() + self.interactive.stepper.abandon()
        for lane in (self.bulk, self.interactive):
            lane.queued.clear()
        self.credit = self.bulk_tokens = 0
        return sorted(keys, key=lambda key: self.added[key])
