"""One stretch of denoising in the sidecar: the batch that began it, every interactive batch
that arrives meanwhile and joins it at its next step (`sidecar.runtime.stepper`), and, once its
bulk work is done while interactive work goes on, the next bulk batch in line: the bulk work
must not wait for a pause in the interactive traffic, which under steady traffic never comes.

Each batch is handed to the finisher as soon as its own tokens exist, so a joined batch is
answered while the batch it joined still denoises. A step that fails ends the stretch: if it held
one batch, that batch is split in halves and retried until the failing items stand alone; if it
held several, each is denoised again on its own first. Only an error that poisons the device
ends the process.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

from sidecar.runtime.request import GenerationRequest
from sidecar.serve import engines
from sidecar.shared.errors import InvalidInput
from sidecar.shared.protocol import Encoding, ErrorKind, ExitCode, Generate
from sidecar.shared.tiers import Tier

if TYPE_CHECKING:  # for annotations only
    from sidecar.serve.loop import Sidecar

log = logging.getLogger("sidecar")

ItemError = tuple[str, ErrorKind, str]  # item id, kind, message


@dataclass
class BatchEntry:
    """One item of a batch, ready for the engine."""

    id: str
    request: GenerationRequest
    faults: Sequence[object]  # the test hooks' (sidecar/serve/hooks.py): none in production
    attempt: int = 1  # of the same text: QA retries count up


@dataclass
class DenoisedGroup:
    """Entries whose tokens exist (the engine's opaque `pending`, one per entry), to be decoded."""

    entries: list[BatchEntry]
    pending: Sequence[object]
    started: float  # when their denoising began


@dataclass
class RunningBatch:
    """A `generate` frame's batch while it denoises."""

    id: int
    encoding: Encoding
    num_items: int
    tier: Tier  # interactive: it joined (or may be joined by) others
    waited_s: float  # the frame loop waiting for it to arrive (0 for one that joined)
    started: float = field(default_factory=time.monotonic)
    entries: list[BatchEntry] = field(default_factory=list)
    failed: list[ItemError] = field(default_factory=list)
    steps: int = 0
    counters: dict[str, float] = field(default_factory=dict)  # the runtime's, for this batch


class BatchRun:
    """Denoise batches in one engine `Stepper` until every one of them is done."""

    def __init__(self, sidecar: Sidecar, stepper: engines.Stepper) -> None:
        self.sidecar = sidecar
        self.stepper = stepper
        self.batches: dict[int, RunningBatch] = {}  # oldest first

    def add(self, message: Generate, tier: Tier, waited_s: float = 0.0) -> None:
        """A batch joins at the next step; what cannot run is answered with its errors."""
        batch = RunningBatch(
            message["batch"], message["encoding"], len(message["items"]), tier, waited_s
        )
        entries = []
        for item in message["items"]:
            try:
                entries.append(self.sidecar.to_entry(item))
            except (InvalidInput, TypeError, ValueError) as exc:
                batch.failed.append((item["id"], ErrorKind.INVALID_INPUT, str(exc)))
        requests = [entry.request for entry in entries]
        refused = self.stepper.add(batch.id, requests, tier, self.on_step(batch))
        for entry, why in zip(entries, refused):
            if why is None:
                batch.entries.append(entry)
            else:
                batch.failed += self.sidecar.item_errors([entry.id], why)
        if not batch.entries:
            self.sidecar.batch_denoised(batch, [])
            return
        self.batches[batch.id] = batch

    def on_step(
        self, batch: RunningBatch, entries: list[BatchEntry] | None = None
    ) -> engines.StepCallback:
        """Its `step` frame, and the test faults of what runs: `entries`, or the whole batch."""

        def stepped(step: int, num_steps: int) -> None:
            running = batch.entries if entries is None else entries
            faults = [fault for entry in running for fault in entry.faults]
            self.sidecar.hooks.on_step(faults, step, num_steps, len(running))
            batch.steps += 1
            self.sidecar.channel.send(
                {"op": "step", "batch": batch.id, "step": step, "of": num_steps}
            )

        return stepped

    def run(self) -> None:
        """Step until every batch is denoised; interactive batches that arrive join between
        steps, and so does the next bulk batch in line once the bulk work here is done. The
        runtime's counters of each step go to the oldest batch it ran for."""
        while self.stepper.busy:
            before = self.sidecar.engine_stats()
            try:
                finished = self.stepper.step()
            except Exception as exc:
                self.recover(exc)
                continue
            oldest = next(iter(self.batches.values()))
            for name, value in self.sidecar.engine_stats().items():
                oldest.counters[name] = oldest.counters.get(name, 0.0) + value - before.get(name, 0)
            for key, pending in finished:
                batch = self.batches.pop(cast(int, key))
                self.sidecar.batch_denoised(
                    batch, [DenoisedGroup(batch.entries, pending, batch.started)]
                )
            inbox = self.sidecar.inbox
            if inbox is None:
                continue
            for message in inbox.take_interactive():
                self.add(message, Tier.INTERACTIVE)
            if self.stepper.busy and not self.stepper.holds_bulk:
                in_turn = inbox.take_bulk_next()
                if in_turn is not None:
                    self.add(in_turn, Tier.BULK)

    def recover(self, exc: Exception) -> None:
        """A step failed: denoise each batch of the stretch again apart (see the docstring)."""
        if engines.is_device_fatal(exc):
            log.critical("device error, exiting so a fresh process takes over: %s", exc)
            os._exit(ExitCode.DEVICE_FATAL)
        batches = [self.batches.pop(cast(int, key)) for key in self.stepper.abandon()]
        log.warning(
            "a step of batches %s failed (%s: %s); each batch again on its own",
            [b.id for b in batches],
            type(exc).__name__,
            exc,
        )
        alone = len(batches) == 1 and len(batches[0].entries) == 1
        errors = self.sidecar.item_errors([batches[0].entries[0].id], exc) if alone else []
        del exc  # its traceback holds the failed step's tensors
        engines.release_cached_memory()
        for batch in batches:
            groups: list[DenoisedGroup] = []
            if alone:  # one item failed alone: that is its answer
                batch.failed += errors
            elif len(batches) == 1:
                groups = self.split(batch, batch.entries)
            else:
                groups = self.denoise_entries(batch, batch.entries)
            self.sidecar.batch_denoised(batch, groups)

    def denoise_entries(
        self, batch: RunningBatch, entries: list[BatchEntry]
    ) -> list[DenoisedGroup]:
        """Denoise entries as one batch; on failure split it and retry each half.

        Returns the groups that succeeded; the items that failed alone go to `batch.failed`."""
        engine = self.sidecar.engine
        assert engine is not None
        started = time.monotonic()
        failure: Exception | None = None
        try:
            requests = [entry.request for entry in entries]
            pending = engine.denoise(requests, self.on_step(batch, entries))
        except Exception as exc:
            failure = exc
        if failure is None:
            return [DenoisedGroup(entries, pending, started)]
        if engines.is_device_fatal(failure):
            log.critical("device error, exiting so a fresh process takes over: %s", failure)
            os._exit(ExitCode.DEVICE_FATAL)
        if len(entries) == 1:
            batch.failed.extend(self.sidecar.item_errors([entries[0].id], failure))
            failure = None
            engines.release_cached_memory()
            return []
        log.warning(
            "batch %d of %d items failed (%s: %s); splitting",
            batch.id,
            len(entries),
            type(failure).__name__,
            failure,
        )
        # Drop the exception before retrying: its traceback holds the failed attempt's tensors.
        failure = None
        engines.release_cached_memory()
        return self.split(batch, entries)

    def split(self, batch: RunningBatch, entries: list[BatchEntry]) -> list[DenoisedGroup]:
        """Each half of the entries apart (one alone fails alone)."""
        if len(entries) == 1:
            return self.denoise_entries(batch, entries)
        middle = len(entries) // 2
        return self.denoise_entries(batch, entries[:middle]) + self.denoise_entries(
            batch, entries[middle:]
        )
