"""(two_streams.py's part) The design itself, host `lanes`: `sidecar.runtime.interleave`'s
`Interleaved` driving a bulk `Stepper` on the runtime's runner and an interactive one on the
small runner and stream, as a sidecar does with `--interactive-stream`, over a window.

The bulk holds the mixed requests of up to 60 words (one round of steps each, so its size stays
put) up to the bulk's tokens, added again whenever they are done; the interactive lane one short
group at a time, the next added as soon as the last has queued its last step. Each short group's
time runs from its `add` to the device's end of its last step (its `ready` event, polled as the
loop goes round); the bulk's rate is its tokens over the window's wall time, the device drained
at its end, against the same loop without interactive work."""

from __future__ import annotations

import itertools
import time
from collections.abc import Hashable
from dataclasses import dataclass, field

import torch

from sidecar.runtime.interleave import BULK_DEPTH, INTERACTIVE_DEPTH, Interleaved, Lane
from sidecar.runtime.omnivoice import OmniVoice
from sidecar.runtime.request import GenerationRequest
from sidecar.runtime.runner import ModelRunner
from sidecar.runtime.stepper import Stepper
from sidecar.shared.tiers import Tier


@dataclass
class Small:
    """The interactive lane's runner and stream, and the group it runs again and again."""

    runner: ModelRunner
    stream: torch.cuda.Stream | None
    requests: list[GenerationRequest]


@dataclass
class Window:
    """What one window measured: the bulk's passes, tokens and useful FLOPs over its seconds;
    each short group's seconds, its steps and the interactive lane's useful FLOPs."""

    passes: int
    tokens: int
    flops: float
    seconds: float
    groups: list[float] = field(default_factory=list)
    steps: int = 0
    small_flops: float = 0.0


def sync(model: OmniVoice) -> None:
    if model.device.type == "cuda":
        torch.cuda.synchronize(model.device)


class Timer:
    """Short groups from their `add` to the device's end of their last step."""

    def __init__(self) -> None:
        self.added: dict[Hashable, float] = {}
        self.waiting: list[tuple[float, torch.cuda.Event | None]] = []
        self.seconds: list[float] = []

    def ended(self, key: Hashable, ready: torch.cuda.Event | None) -> None:
        self.waiting.append((self.added.pop(key), ready))

    def poll(self, wait: bool = False) -> None:
        still = []
        for added, ready in self.waiting:
            if ready is not None and wait:
                ready.synchronize()
            if ready is None or ready.query():
                self.seconds.append(time.perf_counter() - added)
            else:
                still.append((added, ready))
        self.waiting = still


def lanes_for(model: OmniVoice, small: Small) -> Interleaved:
    """The two steppers as `OmniVoice.stepper` makes them with `--interactive-stream`."""
    bulk = model.bulk_stepper()
    lane = Stepper(model.prompter, model.model, small.runner, bulk.step_tokens, bulk.max_members)
    return Interleaved(Lane(bulk, None, BULK_DEPTH), Lane(lane, small.stream, INTERACTIVE_DEPTH))


def window(
    model: OmniVoice, bulk: list[GenerationRequest], small: Small, busy: bool, seconds: float
) -> Window:
    """The loop for `seconds`, with the short groups when `busy`, else the bulk alone."""
    stats, lanes = model.runner.stats, lanes_for(model, small)
    keys, timer = itertools.count(), Timer()
    sync(model)
    before = stats.forward_passes, stats.real_tokens, stats.useful_flops
    small_flops = small.runner.stats.useful_flops
    started = time.perf_counter()
    lanes.add(("bulk", next(keys)), bulk)
    while (
        time.perf_counter() - started < seconds
        or stats.forward_passes == before[0]  # a bulk step and a short group at least
        or (busy and not timer.seconds and not timer.waiting)
    ):
        if busy and not lanes.interactive.stepper.busy:
            key = ("small", next(keys))
            timer.added[key] = time.perf_counter()
            lanes.add(key, small.requests, Tier.INTERACTIVE)
        for key, denoised in lanes.step():
            if key[0] == "bulk":
                lanes.add(("bulk", next(keys)), bulk)
            else:
                timer.ended(key, denoised[0].ready)
        timer.poll()
    sync(model)
    timer.poll(wait=True)
    elapsed = time.perf_counter() - started
    lanes.abandon()
    return Window(
        stats.forward_passes - before[0],
        stats.real_tokens - before[1],
        stats.useful_flops - before[2],
        elapsed,
        timer.seconds,
        max((r.num_step for r in small.requests), default=0),
        small.runner.stats.useful_flops - small_flops,
    )
