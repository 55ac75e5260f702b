"""The arbiter: one slot per device, each with at most one sidecar, kept alive by one loop.

`Pool.run` wakes on an event (a frame, an exit, new work) or a tick, then does the same five
things in the same order every time:

    kill_overdue_sidecars   deadlines: load, heartbeat (busy), ping (idle), stop
    reap_sidecars           the dead: re-queue their batches, count the kill, back off or fail
    manage_sidecars         respawn (after backoff and, on a GPU, once its memory is back),
                            start reaped slots on demand, reap idle ones
    ping_idle_sidecars      an idle sidecar must answer a ping now and then
    dispatch_batches        give work to every sidecar that can take it

Each sidecar's conversation is a `Session` (session.py), whose events the pool turns into
scheduler calls; a slot's states are in slot.py, the stop in shutdown.py. The clock and the
process factory are parameters: tests/supervisor/supervision/test_pool.py drives the verbs in
milliseconds with fake ones. A pass that raises is logged; after LOOP_FAILURE_LIMIT in a row
the pool gives up (`give_up`) and the server exits non-zero, for systemd to restart it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from sidecar.shared.protocol import Message, ProtocolError
from supervisor import metrics
from supervisor.errors import SidecarLost, Unavailable
from supervisor.pool_health import PoolHealth, SlotHealth
from supervisor.settings import SupervisionSettings
from supervisor.supervision import gpu
from supervisor.supervision.gpu import Device
from supervisor.supervision.process import (
    FrameHandler,
    KillReason,
    ProcessFactory,
    SidecarProcess,
    SidecarState,
)
from supervisor.supervision.scheduler import Scheduler
from supervisor.supervision.session import (
    Answered,
    Clock,
    Dropped,
    Event,
    Finished,
    Loaded,
    Refused,
    Session,
    Unsent,
)
from supervisor.supervision.shutdown import give_up, stop_pool
from supervisor.supervision.sidecar_command import sidecar_argv, sidecar_env
from supervisor.supervision.slot import Slot, SlotState
from supervisor.supervision.spare import Spares

log = logging.getLogger("omnivoice.pool")

TICK_S = 0.1
LOOP_FAILURE_LIMIT = 10  # passes in a row that raised before the pool gives up


class Pool:
    def __init__(
        self,
        settings: SupervisionSettings,
        scheduler: Scheduler,
        devices: list[Device],
        *,
        clock: Clock = time.monotonic,
        make_process: ProcessFactory | None = None,
    ) -> None:
        self.settings = settings
        self.scheduler = scheduler
        self.clock = clock
        self.make_process = make_process or self.sidecar_process
        self.slots = [Slot(device) for device in devices]
        # Each device's next sidecar, parked before its device (spare.py); none with fakes.
        spare_process = self.spare_process if make_process is None else None
        self.spares = Spares(settings, clock, spare_process, self.on_frame)
        self.draining = False
        self.stopping = False
        self.ever_ready = False
        self.broken = False  # the loop gave up (LOOP_FAILURE_LIMIT)
        self.all_failed = asyncio.Event()
        self.last_pass_at: float | None = None  # the last full pass (systemd's watchdog reads it)
        self.warm_until = 0.0  # clock time: keep or start a sidecar until then (`warm_up`)
        self.time_to_ready_s: float | None = None  # the last start's, from spawn to `ready`
        self._wakeup = asyncio.Event()
        self.hurried = asyncio.Event()  # a second SIGTERM: stop at once
        self.task: asyncio.Task[None] | None = None
        self._stop_task: asyncio.Task[None] | None = None
        scheduler.wake = self.wake
        scheduler.capacity = len(self.slots)

    def wake(self) -> None:
        self._wakeup.set()

    def warm_up(self, until: float) -> None:
        """Scheduled work is due: keep (or start) a sidecar until `until` on the pool's clock."""
        self.warm_until = max(self.warm_until, until)
        self.wake()

    # ------------------------------------------------------------ the loop

    async def start(self) -> None:
        for slot in self.slots:
            await self.spawn_sidecar(slot)
        self.task = asyncio.create_task(self.run(), name="pool")

    async def run(self) -> None:
        """The arbiter loop. It ends only when `stop` cancels it, or when it gives up."""
        failures = 0
        while True:
            with contextlib.suppress(asyncio.TimeoutError):  # a tick: work goes on without a wake
                await asyncio.wait_for(self._wakeup.wait(), TICK_S)
            self._wakeup.clear()
            try:
                await self.run_once()
                failures = 0
            except Exception:  # a bug here must not stop supervision at once...
                failures += 1
                log.exception("pool loop pass failed (%d in a row)", failures)
                if failures >= LOOP_FAILURE_LIMIT:  # ...nor spin forever
                    give_up(self, f"the pool loop failed {failures} times in a row")
                    return
            self.last_pass_at = self.clock()

    async def run_once(self) -> None:
        self.kill_overdue_sidecars()
        self.reap_sidecars()
        await self.manage_sidecars()
        self.ping_idle_sidecars()
        self.dispatch_batches()

    def kill_overdue_sidecars(self) -> None:
        now = self.clock()
        for slot in self.slots:
            session = slot.session
            if session is not None and (overdue := session.overdue(self.settings, now)):
                self.kill_sidecar(session.process, *overdue)

    def kill_sidecar(self, proc: SidecarProcess, reason: KillReason, detail: str) -> None:
        log.warning("%s: %s (%s); SIGKILL to its process group", proc.tag, reason.value, detail)
        proc.kill(reason, detail)

    def reap_sidecars(self) -> None:
        for slot in self.slots:
            session = slot.session
            if session is None or session.state is not SidecarState.DEAD:
                continue
            slot.session, proc = None, session.process
            reason = proc.kill_reason or KillReason.EXITED
            slot.kills[reason.value] += 1
            slot.last_kill = reason.value
            planned = reason in (KillReason.SHUTDOWN, KillReason.IDLE)
            level = logging.INFO if planned else logging.ERROR
            log.log(level, "%s: %s, %s", proc.tag, proc.exit_description, reason.value)
            for i, batch in enumerate(session.batches):
                if self.stopping or planned:
                    lost = SidecarLost("the server shut down before this request finished")
                    self.scheduler.fail_batch(batch, lost)
                else:
                    self.scheduler.requeue(batch, reason.value, ran=i == 0 or batch.started)
            if self.stopping:
                slot.change_state(SlotState.STOPPED)
            elif reason is KillReason.IDLE:
                slot.change_state(SlotState.REAPED, f"idle for {self.settings.idle_reap_s:g} s")
            else:
                slot.after_death(session, self.settings, self.clock())

    async def manage_sidecars(self) -> None:
        await self.spares.tend(self.slots, self.stopping)
        if self.stopping:
            return
        now = self.clock()
        for slot in self.slots:
            if slot.state is SlotState.BACKOFF:
                if now >= slot.respawn_at and slot.memory_is_back(self.settings, now):
                    await self.spawn_sidecar(slot)
            elif slot.state is SlotState.REAPED and self.needs_capacity():
                await self.spawn_sidecar(slot)
            elif slot.state is SlotState.ACTIVE:
                self.reap_if_idle(slot, now)
        self.scheduler.capacity = sum(1 for slot in self.slots if slot.usable)
        if self.scheduler.capacity == 0 and not self.all_failed.is_set():
            log.critical("every device has failed; no request can be served")
            self.scheduler.fail_queued(
                Unavailable("every device has failed; see /health", retry_after_s=60)
            )
            self.all_failed.set()

    def needs_capacity(self) -> bool:
        """Work is waiting (or due: `warm_up`) and no running or starting sidecar can take it."""
        if not self.scheduler.has_work() and self.clock() >= self.warm_until:
            return False
        free = (SidecarState.STARTING, SidecarState.READY)
        return not any(s.process is not None and s.process.state in free for s in self.slots)

    def reap_if_idle(self, slot: Slot, now: float) -> None:
        s, session = self.settings, slot.session
        busy = self.scheduler.has_work() or now < self.warm_until
        if s.idle_reap_s <= 0 or session is None or session.state is not SidecarState.READY or busy:
            return
        running = sum(1 for other in self.slots if other.state is SlotState.ACTIVE)
        if (idle_s := now - session.idle_since) >= s.idle_reap_s and running > s.min_warm:
            log.info(
                "%s: idle for %.1f s; stopping it to free %s", session.tag, idle_s, slot.device.name
            )
            session.process.stop(KillReason.IDLE, s.stop_timeout_s)

    def ping_idle_sidecars(self) -> None:
        now = self.clock()
        for slot in self.slots:
            session = slot.session
            if session is None or session.state is not SidecarState.READY:
                continue
            idle_s = now - session.process.last_frame_at
            if session.ping_sent_at is None and idle_s >= self.settings.ping_interval_s:
                session.ping()

    def dispatch_batches(self) -> None:
        """Idle sidecars first, then the interactive work left joins sidecars that hold bulk
        work (`dispatch_joins`), then a batch ahead for busy ones with room (`Session.room_ahead`).

        An idle sidecar is served before a busy one is joined, so that with several GPUs
        interactive work spreads over the idle ones first. A batch ahead must be full or
        overdue; a third one, sent while the first only decodes, must be full: under a light
        load it would only take a late request's place in a batch formed later. A task the
        poison rule isolated runs in an idle sidecar with nothing queued behind it (the
        scheduler hands it out only when not `ahead`), so its kill is its own.
        """
        if self.stopping:
            return
        held = [(slot, slot.session) for slot in self.slots if slot.session is not None]
        idle = [(slot, x) for slot, x in held if x.state is SidecarState.READY]
        can_pipeline = [x for x in held if x[1].state is SidecarState.BUSY and x[1].room_ahead()]
        busy = [(slot, x) for slot, x in can_pipeline if not x.isolated]
        busy.sort(key=lambda x: len(x[1].batches))  # a third batch only after every second
        for slot, session in idle:
            if not self.send_next(slot, session):
                break
        self.dispatch_joins(held)
        for slot, session in busy:
            if not self.send_next(slot, session):
                return

    def send_next(self, slot: Slot, session: Session) -> bool:
        """Send the session the scheduler's next batch for it, if there is one."""
        busy_now = session.state is SidecarState.BUSY
        batch = self.scheduler.next_batch(
            ahead=busy_now,
            only_full=len(session.batches) >= 2,
            bulk_only=busy_now and session.holds_bulk(),
        )
        if batch is None:
            return False
        for event in session.send_batch(batch):
            self.apply(slot, event)
        return True

    def dispatch_joins(self, held: list[tuple[Slot, Session]]) -> None:
        """Interactive work goes at once to a sidecar that holds bulk work, or under a light load
        to one that holds only interactive work (`--light-joins`), to join the batch it denoises
        at the next step (`Session.join_room`): it never waits for that batch, the one behind
        it, or a bulk batch's decode."""
        light = self.settings.sidecar.interactive_step_tokens if self.settings.light_joins else 0
        for slot, session in held:
            if session.state is not SidecarState.BUSY or session.isolated:
                continue
            room = session.join_room(light)
            if room is None:
                continue
            batch = self.scheduler.next_join_batch(max_tokens=room)
            if batch is None:
                continue
            for event in session.send_batch(batch):
                self.apply(slot, event)

    # ------------------------------------------------------------ spawning and frames

    def sidecar_process(
        self, device: Device, on_frame: FrameHandler, wake: Callable[[], None]
    ) -> SidecarProcess:
        """The real process factory: `python -P -m sidecar` for the device."""
        return SidecarProcess(
            device,
            sidecar_argv(self.settings.sidecar, device),
            sidecar_env(device),
            self.settings.sidecar.max_frame_bytes,
            on_frame,
            wake,
            self.clock,
        )

    def spare_process(self, device: Device, on_frame: FrameHandler) -> SidecarProcess:
        """A spare for the device: `python -P -m sidecar ... --park` (spare.py)."""
        argv = sidecar_argv(self.settings.sidecar, device, park=True)
        return SidecarProcess(
            device,
            argv,
            sidecar_env(device),
            self.settings.sidecar.max_frame_bytes,
            on_frame,
            self.wake,
            self.clock,
        )

    async def spawn_sidecar(self, slot: Slot) -> None:
        if slot.device.index is not None:
            slot.memory_before_start = gpu.memory_used(slot.device.index)
        if (spare := self.spares.take(slot.device)) is not None:
            slot.adopt(spare, self.clock)  # told to go: only the device's part of its start is left
            return
        proc = self.make_process(slot.device, self.on_frame, self.wake)
        await slot.start(proc, self.clock, self.settings)

    def on_frame(self, proc: SidecarProcess, message: Message) -> None:
        """Called by the process's reader for every valid frame; ProtocolError kills it."""
        slot = next(slot for slot in self.slots if slot.device.id == proc.device.id)
        if slot.session is None or slot.session.process is not proc:
            raise ProtocolError("a frame from a sidecar this slot no longer holds")
        for event in slot.session.handle(message):
            self.apply(slot, event)
        self.wake()

    def apply(self, slot: Slot, event: Event) -> None:
        """Turn one session event into scheduler calls."""
        if isinstance(event, Loaded):
            self.ever_ready = True
            if slot.pids[-1] not in self.spares.pids:  # a whole start's (jobs' warm-up reads it)
                self.time_to_ready_s = event.load_s
            slot.loaded(event, self.clock())
        elif isinstance(event, Answered):
            self.scheduler.resolve(event.task, event.message)
        elif isinstance(event, Refused):
            self.scheduler.reject(event.task, event.error)
        elif isinstance(event, Unsent):
            self.scheduler.requeue(event.batch, "unsent", ran=False)
        elif isinstance(event, Dropped):
            self.scheduler.fail_batch(event.batch, event.error)
        elif isinstance(event, Finished):
            batch = event.batch
            self.scheduler.finish_batch(batch, event.wall_s, batch.audio_s, event.stats)
            metrics.record_runtime_stats(event.stats, slot.device.torch_device)

    # ------------------------------------------------------------ reporting and stopping

    def is_ready(self) -> bool:
        """A sidecar can take work now, or a reaped one can be started for it."""
        ready = ("ready", "busy", "reaped")
        return not self.draining and any(s.public_state in ready for s in self.slots)

    def status(self) -> str:
        if self.draining:
            return "draining"
        if self.broken or not any(s.usable for s in self.slots):
            return "failed"
        if not self.ever_ready:
            return "starting"
        if any(s.public_state in ("failed", "backoff", "starting") for s in self.slots):
            return "degraded"
        return "ok"

    def health(self) -> PoolHealth:
        sidecars: list[SlotHealth] = [
            {**slot.health(), "spare": self.spares.health(slot.device)} for slot in self.slots
        ]
        return {"status": self.status(), "sidecars": sidecars, "queue": self.scheduler.depth()}

    def hurry(self) -> None:
        """End a stop now (a second SIGTERM): no more draining, every sidecar is SIGKILLed."""
        self.hurried.set()

    async def stop(self, drain_s: float) -> None:
        """Stop admitting, let work in flight finish for up to drain_s, then stop every sidecar.

        There is only one stop: a later call waits for the first one to finish."""
        if self._stop_task is None:
            self._stop_task = asyncio.create_task(stop_pool(self, drain_s), name="pool-stop")
        await asyncio.shield(self._stop_task)
