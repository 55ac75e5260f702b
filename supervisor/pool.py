"""The arbiter: one slot per device, each with at most one sidecar, kept alive by one loop.

`Pool.run` wakes on an event (a frame, an exit, new work) or a tick, then does the same five
things in the same order every time:

    kill_overdue_sidecars   deadlines: load, heartbeat (busy), ping (idle), stop
    reap_sidecars           the dead: re-queue their batches, count the kill, back off or fail
    manage_sidecars         respawn (after backoff and, on a GPU, once its memory is back),
                            start reaped slots on demand, reap idle ones
    ping_idle_sidecars      an idle sidecar must answer a ping now and then
    dispatch_batches        give work to every sidecar that can take it

A slot's life, on top of its process's own states (process.State):

    ACTIVE --death--> BACKOFF --delay, memory back--> ACTIVE
    ACTIVE --idle--> REAPED --work arrives--> ACTIVE
    ACTIVE/BACKOFF --restart intensity, load error, memory never back--> FAILED
    any --pool stops--> STOPPED
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import os
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from sidecar.protocol import PROTOCOL_VERSION, ExitCode, Message, ProtocolError
from supervisor import gpu, metrics
from supervisor.errors import SidecarLost, Unavailable, from_error_frame
from supervisor.gpu import Device
from supervisor.process import KillReason, SidecarProcess, State
from supervisor.scheduler import Batch, Scheduler
from supervisor.settings import Settings
from supervisor.sidecar_command import sidecar_command

log = logging.getLogger("omnivoice.pool")

TICK_S = 0.1
REPO_ROOT = str(Path(__file__).resolve().parents[1])


class SlotState(str, enum.Enum):
    ACTIVE = "active"  # a sidecar process exists; its own state says more
    BACKOFF = "backoff"  # waiting to respawn: the backoff delay, then the GPU's memory
    REAPED = "reaped"  # stopped while idle; started again when work arrives
    FAILED = "failed"  # given up on
    STOPPED = "stopped"  # the pool has shut down


SLOT_TRANSITIONS: dict[SlotState, frozenset[SlotState]] = {
    SlotState.ACTIVE: frozenset(
        {SlotState.BACKOFF, SlotState.REAPED, SlotState.FAILED, SlotState.STOPPED}
    ),
    SlotState.BACKOFF: frozenset({SlotState.ACTIVE, SlotState.FAILED, SlotState.STOPPED}),
    SlotState.REAPED: frozenset({SlotState.ACTIVE, SlotState.FAILED, SlotState.STOPPED}),
    SlotState.FAILED: frozenset({SlotState.STOPPED}),
    SlotState.STOPPED: frozenset(),
}


@dataclass(eq=False)
class Slot:
    """One device and the bookkeeping that outlives each of its sidecars."""

    device: Device
    state: SlotState = SlotState.BACKOFF
    process: SidecarProcess | None = None
    restarts: int = 0
    kills: Counter[str] = field(default_factory=Counter)
    last_kill: str | None = None  # the reason the last process of this slot ended
    last_error: str | None = None
    restart_times: deque[float] = field(default_factory=deque)
    failures_in_row: int = 0
    respawn_at: float = 0.0
    dead_pid: int | None = None
    died_at: float | None = None
    memory_deadline: float | None = None
    memory_before_start: int | None = None
    pids: list[int] = field(default_factory=list)  # every sidecar it ever started

    def change_state(self, new: SlotState, why: str = "") -> None:
        if new not in SLOT_TRANSITIONS[self.state]:
            raise RuntimeError(f"{self.device.id}: no transition {self.state.value} -> {new.value}")
        level = logging.ERROR if new is SlotState.FAILED else logging.INFO
        log.log(
            level,
            "%s: %s -> %s%s",
            self.device.id,
            self.state.value,
            new.value,
            f" ({why})" if why else "",
        )
        self.state = new

    @property
    def public_state(self) -> str:
        """The state /health shows: starting|ready|busy|reaped|backoff|failed|stopping."""
        if self.state is SlotState.ACTIVE and self.process is not None:
            return "stopping" if self.process.state is State.DEAD else self.process.state.value
        return {SlotState.STOPPED: "stopping"}.get(self.state, self.state.value)

    @property
    def usable(self) -> bool:
        return self.state not in (SlotState.FAILED, SlotState.STOPPED)


def resident_bytes(pid: int | None) -> int | None:
    """A sidecar's resident memory (host RAM; GPU memory is the gpu_memory_peak_bytes metric)."""
    if pid is None:
        return None
    try:
        return int(psutil.Process(pid).memory_info().rss)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


class Pool:
    def __init__(self, settings: Settings, scheduler: Scheduler, devices: list[Device]) -> None:
        self.settings = settings
        self.scheduler = scheduler
        self.slots = [Slot(device) for device in devices]
        self.draining = False
        self.stopping = False
        self.ever_ready = False
        self.all_failed = asyncio.Event()
        self.last_pass_at: float | None = (
            None  # the loop's last full pass (systemd's watchdog reads it)
        )
        self._wakeup = asyncio.Event()
        self._hurry = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stop_task: asyncio.Task[None] | None = None
        scheduler.wake = self.wake
        scheduler.capacity = len(self.slots)

    def wake(self) -> None:
        self._wakeup.set()

    # ------------------------------------------------------------ the loop

    async def start(self) -> None:
        for slot in self.slots:
            await self.spawn_sidecar(slot)
        self._task = asyncio.create_task(self.run(), name="pool")

    async def run(self) -> None:
        """The arbiter loop. It never ends on its own; `stop` cancels it."""
        while True:
            with contextlib.suppress(asyncio.TimeoutError):  # a tick: work goes on without a wake
                await asyncio.wait_for(self._wakeup.wait(), TICK_S)
            self._wakeup.clear()
            try:
                self.kill_overdue_sidecars()
                self.reap_sidecars()
                await self.manage_sidecars()
                self.ping_idle_sidecars()
                self.dispatch_batches()
            except asyncio.CancelledError:
                raise
            except Exception:  # a bug here must not stop supervision
                log.exception("pool loop iteration failed")
            self.last_pass_at = time.monotonic()

    def kill_overdue_sidecars(self) -> None:
        s, now = self.settings, time.monotonic()
        for slot in self.slots:
            proc = slot.process
            if proc is None:
                continue
            if proc.state is State.STARTING:
                silent, age = now - proc.last_frame_at, now - proc.started_at
                if silent > s.load_timeout_s or age > s.load_total_s:
                    self.kill_sidecar(
                        proc,
                        KillReason.LOAD_TIMEOUT,
                        f"not ready after {age:.1f} s, silent for {silent:.1f} s",
                    )
            elif proc.state is State.BUSY:
                silent = now - max(proc.last_frame_at, proc.batches[0].sent_at)
                if silent > s.heartbeat_timeout_s:
                    self.kill_sidecar(
                        proc, KillReason.HEARTBEAT_TIMEOUT, f"busy and silent for {silent:.1f} s"
                    )
            elif proc.state is State.READY and proc.ping_sent_at is not None:
                if now - proc.ping_sent_at > s.ping_timeout_s:
                    self.kill_sidecar(
                        proc, KillReason.PING_TIMEOUT, f"no pong within {s.ping_timeout_s:.1f} s"
                    )
            elif (
                proc.state is State.STOPPING
                and proc.stop_deadline is not None
                and now > proc.stop_deadline
            ):
                log.warning(
                    "%s: did not exit within %.1f s of shutdown; SIGKILL",
                    proc.tag,
                    s.stop_timeout_s,
                )
                proc.kill(proc.kill_reason or KillReason.SHUTDOWN)

    def kill_sidecar(self, proc: SidecarProcess, reason: KillReason, detail: str) -> None:
        log.warning("%s: %s (%s); SIGKILL to its process group", proc.tag, reason.value, detail)
        proc.kill(reason, detail)

    def reap_sidecars(self) -> None:
        for slot in self.slots:
            proc = slot.process
            if proc is None or proc.state is not State.DEAD:
                continue
            slot.process = None
            reason = proc.kill_reason or KillReason.EXITED
            slot.kills[reason.value] += 1
            slot.last_kill = reason.value
            planned = reason in (KillReason.SHUTDOWN, KillReason.IDLE)
            log.log(
                logging.INFO if planned else logging.ERROR,
                "%s: %s, %s",
                proc.tag,
                proc.exit_description,
                reason.value,
            )
            for i, batch in enumerate(proc.batches):
                if self.stopping or planned:
                    self.scheduler.fail_batch(
                        batch, SidecarLost("the server shut down before this request finished")
                    )
                else:
                    self.scheduler.requeue(batch, reason.value, ran=i == 0 or batch.started)
            if self.stopping:
                slot.change_state(SlotState.STOPPED)
            elif reason is KillReason.IDLE:
                slot.change_state(SlotState.REAPED, f"idle for {self.settings.idle_reap_s:g} s")
            else:
                self.schedule_respawn(slot, proc, reason)

    def schedule_respawn(self, slot: Slot, proc: SidecarProcess, reason: KillReason) -> None:
        """After an unplanned death: back off, or give up on the device."""
        s, now = self.settings, time.monotonic()
        slot.last_error = proc.kill_detail or proc.exit_description
        if proc.reported_error:
            slot.last_error += f": {proc.reported_error}"
        if proc.returncode == ExitCode.LOAD_ERROR and proc.ready_at is None:
            slot.change_state(SlotState.FAILED, f"the model cannot be loaded: {slot.last_error}")
            return
        slot.restart_times.append(now)
        while slot.restart_times and slot.restart_times[0] < now - s.restart_window_s:
            slot.restart_times.popleft()
        if len(slot.restart_times) > s.max_restarts:
            slot.last_error = f"restart intensity reached: {len(slot.restart_times)} deaths within {s.restart_window_s:g} s; last: {slot.last_error}"
            slot.change_state(SlotState.FAILED, slot.last_error)
            return
        slot.restarts += 1
        slot.failures_in_row += 1
        delay = (
            0.0
            if slot.failures_in_row == 1
            else min(s.backoff_max_s, s.backoff_initial_s * 2 ** (slot.failures_in_row - 2))
        )
        slot.respawn_at = now + delay
        slot.dead_pid, slot.died_at, slot.memory_deadline = proc.pid, now, None
        slot.change_state(SlotState.BACKOFF, f"respawn in {delay:.1f} s")

    async def manage_sidecars(self) -> None:
        if self.stopping:
            return
        now = time.monotonic()
        for slot in self.slots:
            if (
                slot.state is SlotState.BACKOFF
                and now >= slot.respawn_at
                and self.memory_is_back(slot, now)
            ) or (slot.state is SlotState.REAPED and self.needs_capacity()):
                await self.spawn_sidecar(slot)
            elif slot.state is SlotState.ACTIVE:
                self.reap_if_idle(slot, now)
        self.scheduler.capacity = sum(1 for slot in self.slots if slot.usable)
        if self.scheduler.capacity == 0 and not self.all_failed.is_set() and not self.stopping:
            log.critical("every device has failed; no request can be served")
            self.scheduler.fail_queued(
                Unavailable("every device has failed; see /health", retry_after_s=60)
            )
            self.all_failed.set()

    def memory_is_back(self, slot: Slot, now: float) -> bool:
        """On a GPU, a new sidecar starts only once the dead one's memory has been released."""
        if slot.device.index is None or slot.died_at is None:
            return True
        if slot.memory_deadline is None:
            slot.memory_deadline = now + self.settings.memory_reclaim_s
        back, figures = gpu.memory_is_back(
            slot.device.index,
            slot.dead_pid,
            slot.memory_before_start,
            self.settings.memory_slack_mb * 2**20,
        )
        if back is not False:
            log.info(
                "%s: memory back %.2f s after the death (%s)",
                slot.device.id,
                now - slot.died_at,
                figures,
            )
            return True
        if now > slot.memory_deadline:
            slot.last_error = f"GPU memory did not come back within {self.settings.memory_reclaim_s:g} s: {figures}"
            slot.change_state(SlotState.FAILED, slot.last_error)
        return False

    def needs_capacity(self) -> bool:
        """Work is waiting and no running or starting sidecar is free to take it."""
        if not self.scheduler.has_work():
            return False
        return not any(
            s.process is not None and s.process.state in (State.STARTING, State.READY)
            for s in self.slots
        )

    def reap_if_idle(self, slot: Slot, now: float) -> None:
        s, proc = self.settings, slot.process
        if (
            s.idle_reap_s <= 0
            or proc is None
            or proc.state is not State.READY
            or self.scheduler.has_work()
        ):
            return
        running = sum(1 for other in self.slots if other.state is SlotState.ACTIVE)
        if now - proc.idle_since >= s.idle_reap_s and running > s.min_warm:
            log.info(
                "%s: idle for %.1f s; stopping it to free %s",
                proc.tag,
                now - proc.idle_since,
                slot.device.name,
            )
            proc.stop(KillReason.IDLE, s.stop_timeout_s)

    def ping_idle_sidecars(self) -> None:
        now = time.monotonic()
        for slot in self.slots:
            proc = slot.process
            if proc is None or proc.state is not State.READY or proc.ping_sent_at is not None:
                continue
            if now - proc.last_frame_at >= self.settings.ping_interval_s:
                proc.ping_nonce += 1
                proc.ping_sent_at = now
                proc.send({"op": "ping", "nonce": proc.ping_nonce})

    def dispatch_batches(self) -> None:
        """Idle sidecars first, then a batch ahead for busy ones with one in flight."""
        if self.stopping:
            return
        candidates = [s.process for s in self.slots if s.process is not None]
        for proc in [p for p in candidates if p.state is State.READY] + [
            p for p in candidates if p.state is State.BUSY
        ]:
            if len(proc.batches) >= 2:
                continue
            batch = self.scheduler.next_batch(ahead=proc.state is State.BUSY)
            if batch is None:
                return
            self.send_batch(proc, batch)

    def send_batch(self, proc: SidecarProcess, batch: Batch) -> None:
        try:
            sent = proc.send(batch.frame())
        except ProtocolError as exc:  # over the frame cap
            self.scheduler.fail_batch(
                batch, Unavailable(f"the request is too large to send to a sidecar: {exc}")
            )
            return
        if not sent:
            self.scheduler.requeue(batch, "unsent", ran=False)
            return
        batch.sent_at = time.monotonic()
        proc.batches.append(batch)
        if proc.state is State.READY:
            proc.change_state(State.BUSY)
        log.debug("%s: batch %d (%d tasks) sent", proc.tag, batch.id, len(batch.tasks))

    # ------------------------------------------------------------ spawning

    def sidecar_argv(self, device: Device) -> list[str]:
        s = self.settings
        argv = [
            *sidecar_command(),
            "--engine",
            s.engine,
            "--model",
            s.model,
            "--device",
            device.torch_device,
            "--dtype",
            s.dtype,
            "--id",
            device.id,
            "--max-frame-bytes",
            str(s.max_frame_bytes),
            "--warmup-steps",
            str(s.warmup_steps),
        ]
        return argv + (
            ["--test-faults", "--test-fault-dir", s.resolved_test_fault_dir()]
            if s.test_faults
            else []
        )

    def sidecar_env(self, device: Device) -> dict[str, str]:
        env = dict(os.environ)
        env.update(device.environment())
        env["PYTHONUNBUFFERED"] = "1"
        env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO_ROOT, env.get("PYTHONPATH", "")) if p)
        return env

    async def spawn_sidecar(self, slot: Slot) -> None:
        if slot.device.index is not None:
            slot.memory_before_start = gpu.memory_used(slot.device.index)
        proc = SidecarProcess(
            slot.device,
            self.sidecar_argv(slot.device),
            self.sidecar_env(slot.device),
            self.settings.max_frame_bytes,
            self.on_frame,
            self.wake,
        )
        try:
            await proc.start()
        except OSError as exc:
            slot.last_error = f"cannot start a sidecar: {exc}"
            slot.change_state(SlotState.FAILED, slot.last_error)
            return
        slot.process = proc
        slot.pids.append(proc.pid)
        slot.change_state(SlotState.ACTIVE, f"pid {proc.pid}")

    # ------------------------------------------------------------ frames

    def on_frame(self, proc: SidecarProcess, message: Message) -> None:
        """Called by the process's reader for every valid frame; ProtocolError kills the sidecar."""
        getattr(self, f"on_{message['op']}")(proc, message)
        self.wake()

    def on_hello(self, proc: SidecarProcess, message: Any) -> None:
        if message["protocol"] != PROTOCOL_VERSION:
            raise ProtocolError(
                f"sidecar speaks protocol {message['protocol']}, we speak {PROTOCOL_VERSION}"
            )

    def on_progress(self, proc: SidecarProcess, message: Any) -> None:
        log.debug("%s: loading: %s", proc.tag, message["stage"])

    def on_ready(self, proc: SidecarProcess, message: Any) -> None:
        if proc.state is not State.STARTING:
            raise ProtocolError("ready sent twice")
        proc.change_state(State.READY)
        now = time.monotonic()
        proc.info, proc.ready_at, proc.idle_since = message, now, now
        slot = self.slot_of(proc)
        slot.failures_in_row = 0
        self.ever_ready = True
        since_death = (
            f", {now - slot.died_at:.2f} s after the previous one died"
            if slot.died_at is not None
            else ""
        )
        log.info(
            "%s: ready in %.2f s%s (%s)",
            proc.tag,
            now - proc.started_at,
            since_death,
            message["memory"],
        )

    def on_pong(self, proc: SidecarProcess, message: Any) -> None:
        if message["nonce"] == proc.ping_nonce:
            proc.ping_sent_at = None

    def on_step(self, proc: SidecarProcess, message: Any) -> None:
        # The next batch may step while the first one still decodes and answers (the sidecar
        # overlaps them); answers and `done` still come in batch order.
        batch = next((b for b in proc.batches if b.id == message["batch"]), None)
        if batch is None:
            raise ProtocolError(
                f"step for batch {message['batch']}, which this sidecar does not hold"
            )
        batch.started = True

    def on_result(self, proc: SidecarProcess, message: Any) -> None:
        task = self.pending_task(proc, message)
        proc.batches[0].audio_s += message.get("timings", {}).get("audio_s", 0.0)
        self.scheduler.resolve(task, message)

    on_encoded = on_result

    def on_error(self, proc: SidecarProcess, message: Any) -> None:
        if message["batch"] is None:
            log.error("%s: %s: %s", proc.tag, message["kind"], message["message"])
            proc.reported_error = message["message"]
            return
        self.scheduler.reject(
            self.pending_task(proc, message), from_error_frame(message["kind"], message["message"])
        )

    def on_done(self, proc: SidecarProcess, message: Any) -> None:
        batch = self.running_batch(proc, message["batch"])
        missing = [t.id for t in batch.tasks if not t.answered]
        if missing:
            raise ProtocolError(f"batch {batch.id} ended without an answer for {missing}")
        proc.batches.popleft()
        self.scheduler.finish_batch(
            batch, time.monotonic() - batch.sent_at, batch.audio_s, message["stats"]
        )
        metrics.record_runtime_stats(message["stats"], proc.device.torch_device)
        if not proc.batches and proc.state is State.BUSY:
            proc.change_state(State.READY)
            proc.idle_since = time.monotonic()

    def running_batch(self, proc: SidecarProcess, batch_id: int) -> Batch:
        if not proc.batches or proc.batches[0].id != batch_id:
            raise ProtocolError(f"frame for batch {batch_id}, which is not the one running")
        return proc.batches[0]

    def pending_task(self, proc: SidecarProcess, message: Any) -> Any:
        batch = self.running_batch(proc, message["batch"])
        task = batch.task(message["id"])
        if task is None or task.answered:
            raise ProtocolError(
                f"answer for {message['id']!r}, which batch {batch.id} does not hold or already answered"
            )
        task.answered = batch.started = True
        return task

    def slot_of(self, proc: SidecarProcess) -> Slot:
        return next(slot for slot in self.slots if slot.device.id == proc.device.id)

    # ------------------------------------------------------------ reporting and stopping

    def is_ready(self) -> bool:
        """A sidecar can take work now, or a reaped one can be started for it."""
        if self.draining:
            return False
        return any(s.public_state in ("ready", "busy", "reaped") for s in self.slots)

    def status(self) -> str:
        if self.draining:
            return "draining"
        if not any(s.usable for s in self.slots):
            return "failed"
        if not self.ever_ready:
            return "starting"
        if any(s.public_state in ("failed", "backoff", "starting") for s in self.slots):
            return "degraded"
        return "ok"

    def health(self) -> dict[str, Any]:
        return {
            "status": self.status(),
            "sidecars": [
                {
                    "id": s.device.id,
                    "device": s.device.name,
                    "pid": s.process.pid if s.process is not None else None,
                    "state": s.public_state,
                    "restarts": s.restarts,
                    "kills": dict(s.kills),
                    "last_kill": s.last_kill,
                    "last_error": s.last_error,
                    "memory_bytes": resident_bytes(s.process.pid if s.process else None),
                }
                for s in self.slots
            ],
            "queue": self.scheduler.depth(),
        }

    def hurry(self) -> None:
        """End a stop now (a second SIGTERM): no more draining, every sidecar is SIGKILLed."""
        self._hurry.set()

    async def stop(self, drain_s: float) -> None:
        """Stop admitting, let work in flight finish for up to drain_s, then stop every sidecar.
        There is only one stop: a later call waits for the first one to finish."""
        if self._stop_task is None:
            self._stop_task = asyncio.create_task(self._stop(drain_s), name="pool-stop")
        await asyncio.shield(self._stop_task)

    async def drain(self, drain_s: float) -> bool:
        """Wait until every admitted task has ended; False if drain_s passed or hurry() came first."""
        if not self.scheduler.unfinished:
            return True
        idle, hurry = (
            asyncio.create_task(self.scheduler.wait_until_idle(drain_s)),
            asyncio.create_task(self._hurry.wait()),
        )
        done, _ = await asyncio.wait((idle, hurry), return_when=asyncio.FIRST_COMPLETED)
        for task in (idle, hurry):
            task.cancel()
        return idle in done and idle.result()

    async def _stop(self, drain_s: float) -> None:
        self.draining = True
        self.scheduler.close(
            Unavailable("the server is shutting down", retry_after_s=max(1.0, drain_s))
        )
        began = time.monotonic()
        if not (drained := await self.drain(drain_s)):
            log.warning(
                "drain: over after %.1f s, %d task(s) unfinished",
                time.monotonic() - began,
                len(self.scheduler.unfinished),
            )
        self.stopping = True
        self.scheduler.fail_queued(Unavailable("the server shut down before this request ran"))
        for slot in self.slots:
            proc = slot.process
            if proc is not None and (
                self._hurry.is_set() or (proc.state is State.BUSY and not drained)
            ):
                # What it still runs will not be waited for: BUSY -> STOPPING now, not after its batch.
                self.kill_sidecar(proc, KillReason.SHUTDOWN, "the drain is over")
            elif proc is not None:
                proc.stop(KillReason.SHUTDOWN, self.settings.stop_timeout_s)
            elif slot.state is not SlotState.STOPPED:
                slot.change_state(SlotState.STOPPED)
        deadline, hurried = (
            time.monotonic() + self.settings.stop_timeout_s + 5.0,
            self._hurry.is_set(),
        )
        while any(s.process is not None for s in self.slots) and time.monotonic() < deadline:
            if self._hurry.is_set() and not hurried:
                hurried = True
                for proc in [
                    s.process
                    for s in self.slots
                    if s.process is not None and s.process.state is not State.DEAD
                ]:
                    self.kill_sidecar(proc, KillReason.SHUTDOWN, "told to stop at once")
            self.wake()
            await asyncio.sleep(TICK_S)
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        for slot in self.slots:  # the loop is gone: finish whatever it did not
            if slot.process is not None:
                slot.process.kill(KillReason.SHUTDOWN)
                await slot.process.close()
                self.reap_sidecars()
        log.info("pool stopped")
