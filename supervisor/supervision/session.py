"""The conversation with one sidecar: what it holds, and what each of its frames means.

A `Session` wraps one `SidecarProcess`. It owns the batches in flight (`room_ahead` says how
many), matches every answer to its batch and task, keeps the ping
nonce and the `ready` info, and drives the process's READY <-> BUSY states. It never touches
the scheduler: `handle` turns each frame into typed events, and the pool acts on them. A frame
that breaks the conversation (an answer for a task it does not hold, `done` with answers
missing, a second `ready`) raises ProtocolError, and the process reader kills the sidecar.
"""

from __future__ import annotations

import itertools
import json
import logging
import sys
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sidecar.shared.protocol import (
    PROTOCOL_VERSION,
    Message,
    ProtocolError,
    Ready,
    Tier,
    encode_frame,
)
from supervisor.errors import InvalidRequest, ServerError, Unavailable, from_error_frame
from supervisor.settings import SupervisionSettings
from supervisor.supervision.process import KillReason, SidecarProcess, SidecarState
from supervisor.supervision.work import Answer, Batch, Task
from supervisor.tracing import batches as traced

log = logging.getLogger("omnivoice.session")

Clock = Callable[[], float]

MAX_WAITING_FOR_DEVICE = 2  # batches sent and not yet denoised: one denoising, one in the pipe
MAX_IN_FLIGHT = 3  # and one more decoding in the sidecar's finisher
MAX_JOINS = 16  # interactive batches sent to join a running bulk batch, not yet answered


@dataclass(frozen=True)
class Loaded:
    """The sidecar sent `ready` after load_s seconds."""

    info: Ready
    load_s: float


@dataclass(frozen=True)
class Answered:
    """A task's audio (a `result`), voice (an `encoded`), `transcript` or `aligned` arrived."""

    task: Task
    message: Answer  # its kind's answer (`handle` checks)


@dataclass(frozen=True)
class Refused:
    """The sidecar answered a task with an `error` frame."""

    task: Task
    error: ServerError


@dataclass(frozen=True)
class Finished:
    """A batch ended (`done`) with every task answered."""

    batch: Batch
    wall_s: float
    stats: dict[str, float]


@dataclass(frozen=True)
class Unsent:
    """A batch was not sent (the pipe is gone, or some of its tasks could not be encoded and
    were refused): what is left of it goes back to the queue."""

    batch: Batch


@dataclass(frozen=True)
class Dropped:
    """A batch that cannot be sent at all: its tasks fail with `error`."""

    batch: Batch
    error: ServerError


Event = Loaded | Answered | Refused | Finished | Unsent | Dropped


def unsendable_tasks(batch: Batch, max_frame_bytes: int) -> list[tuple[Task, str]]:
    """The tasks of a batch that fail to encode even alone, each with why."""
    guilty = []
    for task in batch.pending():
        try:
            encode_frame(Batch(batch.id, batch.kind, [task]).frame(), max_frame_bytes)
        except Exception as exc:  # whatever msgpack raises: UnicodeEncodeError, OverflowError...
            guilty.append((task, f"{type(exc).__name__}: {exc}"))
    return guilty


# What the debug log shows of each generation item sent: what the model reads, and how.
TRACED_FIELDS = ("id", "text", "seed", "language", "instruct", "speed", "duration")


def describe_item(item: Mapping[str, Any]) -> str:
    """A generation item as one JSON line, its voice prompt by its transcript (the prompt's
    codec tokens are too long for a log)."""
    shown = {key: item[key] for key in TRACED_FIELDS if key in item}
    prompt = item.get("voice")
    if prompt:
        shown["prompt_text"] = prompt.get("ref_text")
    return json.dumps(shown, ensure_ascii=False)


class Session:
    """The pool's side of the conversation with one sidecar process."""

    def __init__(self, process: SidecarProcess, clock: Clock) -> None:
        self.process = process
        self.clock = clock
        self.batches: deque[Batch] = deque()
        self.info: Ready | None = None
        self.ready_at: float | None = None
        self.idle_since = clock()
        self.ping_nonce = 0
        self.ping_sent_at: float | None = None
        self.reported_error: str | None = None  # an `error` about the sidecar (a failed load)

    @property
    def state(self) -> SidecarState:
        return self.process.state

    @property
    def tag(self) -> str:
        return self.process.tag

    def room_ahead(self) -> bool:
        """Whether a busy sidecar may be sent another batch: while fewer than two of its
        batches wait for the device (one denoising, one in the pipe), and at most three in
        all, the third once the first is past the device and only decodes and answers. So the
        device has its next batch ready however long a batch takes to decode and send, and no
        more is committed to one sidecar than that."""
        held = [batch for batch in self.batches if batch.tier is Tier.BULK]
        waiting = sum(1 for batch in held if not batch.denoised)
        return waiting < MAX_WAITING_FOR_DEVICE and len(held) < MAX_IN_FLIGHT

    def join_room(self, light_tokens: int = 0) -> int | None:
        """How many estimated tokens of interactive work may go to this sidecar now as a batch
        that joins (None: none may). The sidecar merges such a batch into the batch it denoises
        at the next step (or runs it at once if none) and decodes it in its interactive
        finisher, so it waits neither for a bulk batch, nor for the one behind it, nor for a bulk
        decode. Any amount while the sidecar holds bulk work, denoising or decoding. Without bulk
        work interactive tasks go in batches that run in turn (`Tier.BULK` on the wire),
        pipelined, which keeps a saturated sidecar's batches full-size; with `light_tokens`
        (`--light-joins`) they also join while the load is light: nothing waits behind the batch
        being denoised, and what is denoised and the join hold at most `light_tokens`."""
        joins = sum(1 for batch in self.batches if batch.tier is Tier.INTERACTIVE)
        if joins >= MAX_JOINS:
            return None
        if self.holds_bulk():
            return sys.maxsize
        in_turn = sum(1 for b in self.batches if b.tier is Tier.BULK and not b.denoised)
        if light_tokens <= 0 or in_turn > 1:
            return None
        denoising = sum(t.est_tokens for b in self.batches if not b.denoised for t in b.tasks)
        room = light_tokens - denoising
        return room if room > 0 else None

    def holds_bulk(self) -> bool:
        """A batch with bulk tasks is in flight (sent, not yet answered)."""
        return any(
            batch.tier is Tier.BULK and any(task.tier is Tier.BULK for task in batch.tasks)
            for batch in self.batches
        )

    @property
    def isolated(self) -> bool:
        """It runs a task the poison rule isolated: nothing may share the sidecar with it."""
        return any(task.alone for batch in self.batches for task in batch.tasks)

    def overdue(self, s: SupervisionSettings, now: float) -> tuple[KillReason, str] | None:
        """The deadline it has missed, if any: load, heartbeat (busy), ping (idle), stop."""
        proc = self.process
        if proc.state is SidecarState.STARTING:
            silent, age = now - proc.last_frame_at, now - proc.started_at
            if silent > s.load_timeout_s or age > s.load_total_s:
                why = f"not ready after {age:.1f} s, silent for {silent:.1f} s"
                return KillReason.LOAD_TIMEOUT, why
        elif proc.state is SidecarState.BUSY:
            silent = now - max(proc.last_frame_at, self.batches[0].sent_at)
            if silent > s.heartbeat_timeout_s:
                return KillReason.HEARTBEAT_TIMEOUT, f"busy and silent for {silent:.1f} s"
        elif proc.state is SidecarState.READY and self.ping_sent_at is not None:
            if now - self.ping_sent_at > s.ping_timeout_s:
                return KillReason.PING_TIMEOUT, f"no pong within {s.ping_timeout_s:.1f} s"
        elif (
            proc.state is SidecarState.STOPPING
            and proc.stop_deadline is not None
            and now > proc.stop_deadline
        ):
            why = f"did not exit within {s.stop_timeout_s:.1f} s of being told to stop"
            return proc.kill_reason or KillReason.SHUTDOWN, why
        return None

    # ------------------------------------------------------------ sending

    def send_batch(self, batch: Batch) -> list[Event]:
        """Send a batch. What is not sent comes back as events: no exception loses a task."""
        try:
            sent = self.process.send(batch.frame())
        except ProtocolError as exc:  # over the frame cap
            why = f"the request is too large to send to a sidecar: {exc}"
            return [Dropped(batch, Unavailable(why))]
        except Exception as exc:  # nothing was written; find the tasks that cannot be
            return self.unsendable(batch, exc)
        if not sent:
            return [Unsent(batch)]
        batch.sent_at = self.clock()
        traced.sent(batch)
        self.batches.append(batch)
        if self.state is SidecarState.READY:
            self.process.change_state(SidecarState.BUSY)
        log.debug("%s: batch %d (%d tasks) sent", self.tag, batch.id, len(batch.tasks))
        if batch.kind == "generate" and log.isEnabledFor(logging.DEBUG):
            for task in batch.tasks:
                log.debug("%s: batch %d item %s", self.tag, batch.id, describe_item(task.payload))
        return []

    def unsendable(self, batch: Batch, exc: Exception) -> list[Event]:
        """Refuse the tasks that fail to encode alone and re-queue the others; if none is to
        blame, fail the batch rather than try it again forever."""
        guilty = unsendable_tasks(batch, self.process.max_frame_bytes)
        if not guilty:
            log.error("%s: batch %d cannot be sent: %r", self.tag, batch.id, exc)
            why = f"the request could not be sent to a sidecar: {type(exc).__name__}: {exc}"
            return [Dropped(batch, ServerError(why))]
        log.warning(
            "%s: batch %d: %d task(s) cannot be sent (%r); the others are re-queued",
            self.tag,
            batch.id,
            len(guilty),
            exc,
        )
        refused: list[Event] = [
            Refused(
                task,
                InvalidRequest(f"the request cannot be sent to a sidecar: {why}", param="input"),
            )
            for task, why in guilty
        ]
        return [*refused, Unsent(batch)]

    def ping(self) -> None:
        self.ping_nonce += 1
        self.ping_sent_at = self.clock()
        self.process.send({"op": "ping", "nonce": self.ping_nonce})

    # ------------------------------------------------------------ receiving

    def handle(self, message: Message) -> list[Event]:  # noqa: C901  one branch per op a sidecar sends, in the protocol's order
        """What one valid frame means; ProtocolError if it breaks the conversation."""
        if message["op"] == "hello":
            if message["protocol"] != PROTOCOL_VERSION:
                raise ProtocolError(
                    f"sidecar speaks protocol {message['protocol']}, we speak {PROTOCOL_VERSION}"
                )
            return []
        if message["op"] == "progress":
            log.debug("%s: loading: %s", self.tag, message["stage"])
            return []
        if message["op"] == "ready":
            return [self.on_ready(message)]
        if message["op"] == "pong":
            if message["nonce"] == self.ping_nonce:
                self.ping_sent_at = None
            return []
        if message["op"] == "step":
            # The next batch may step while the first one still decodes and answers (the
            # sidecar overlaps them), and a joined batch beside the one it joined.
            held = next((b for b in self.batches if b.id == message["batch"]), None)
            if held is None:
                raise ProtocolError(f"step for batch {message['batch']}, which it does not hold")
            held.started = True
            return []
        if message["op"] == "denoised":
            held = next((b for b in self.batches if b.id == message["batch"]), None)
            if held is None:
                raise ProtocolError(
                    f"denoised for batch {message['batch']}, which it does not hold"
                )
            held.started = held.denoised = True
            return []
        if message["op"] in ("result", "encoded", "transcript", "aligned"):
            batch, task = self.pending_task(message["batch"], message["id"])
            if message["op"] != task.answers:  # an answer of another kind than the task's
                raise task.mismatch(message)
            if message["op"] == "result":
                batch.audio_s += message["timings"].get("audio_s", 0.0)
            traced.answered(batch, task, message, self.clock())
            return [Answered(task, message)]
        if message["op"] == "error":
            if message["batch"] is None:
                log.error("%s: %s: %s", self.tag, message["kind"], message["message"])
                self.reported_error = message["message"]
                return []
            _, task = self.pending_task(message["batch"], message["id"])
            return [Refused(task, from_error_frame(message["kind"], message["message"]))]
        if message["op"] == "done":
            return [self.on_done(message["batch"], message["stats"])]
        raise ProtocolError(f"op {message['op']!r} is not one a sidecar sends")

    def on_ready(self, info: Ready) -> Loaded:
        if self.state is not SidecarState.STARTING:
            raise ProtocolError("ready sent twice")
        self.process.change_state(SidecarState.READY)
        now = self.clock()
        self.info, self.ready_at, self.idle_since = info, now, now
        return Loaded(info, now - self.process.started_at)

    def on_done(self, batch_id: int, stats: dict[str, float]) -> Finished:
        batch = self.held_batch(batch_id)
        missing = [t.id for t in batch.tasks if not t.answered]
        if missing:
            raise ProtocolError(f"batch {batch.id} ended without an answer for {missing}")
        self.batches.remove(batch)
        now = self.clock()
        traced.finished(batch, stats, now)
        if not self.batches and self.state is SidecarState.BUSY:
            self.process.change_state(SidecarState.READY)
            self.idle_since = now
        return Finished(batch, now - batch.sent_at, stats)

    def held_batch(self, batch_id: int) -> Batch:
        """The held batch a frame is for. Batches answer in the order they were sent, except a
        joined one (`Batch.tier` interactive), which may finish before or after any other."""
        batch = next((b for b in self.batches if b.id == batch_id), None)
        if batch is None:
            raise ProtocolError(f"frame for batch {batch_id}, which it does not hold")
        ahead = itertools.takewhile(lambda b: b is not batch, self.batches)
        in_turn = batch.tier is Tier.BULK
        if in_turn and any(b.tier is Tier.BULK for b in ahead):
            raise ProtocolError(f"frame for batch {batch_id}, which is not the one running")
        return batch

    def pending_task(self, batch_id: int | None, task_id: str | None) -> tuple[Batch, Task]:
        if batch_id is None:
            raise ProtocolError("an answer without a batch")
        batch = self.held_batch(batch_id)
        task = batch.task(task_id) if task_id is not None else None
        if task is None or task.answered:
            raise ProtocolError(
                f"answer for {task_id!r}, which batch {batch.id} does not hold or already answered"
            )
        task.answered = batch.started = True
        return batch, task
