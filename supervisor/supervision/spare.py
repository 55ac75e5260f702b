"""Warm spares: each device's next sidecar, started ahead of need and parked before its device.

A respawn used to wait for a whole start: Python's imports (torch and the runtime), the checkpoint
read, the codec built, and only then the device's part (the weights moved, the layer stack
compiled, the graphs captured). With --spare-sidecars (auto: on GPUs), once a device's sidecar
is ready the pool starts another one for it with `--park`: it does all that needs no device
(sidecar/runtime/preload.py), says `progress: parked`, and waits (sidecar/serve/spare.py). When
the device's sidecar dies, the respawn (after the backoff and, on a GPU, once the dead one's
memory is back, as for a fresh process) takes the spare instead of exec'ing a new process and
sends it `go`: what is left is the device's part of a start. Its load deadlines count from `go`.
A new spare starts once the adopted one is ready.

What a spare never does: touch its device before `go` (no CUDA context, no GPU memory), or
outlive its device's sidecar. A device stopped for idleness, a failed one and a stopping pool
have none. Each spare is its own process group, SIGKILLed as a whole when it is not needed. It
costs host memory (its imports, the checkpoint's weights, the codec): /health shows its pid,
state and resident memory in its device's entry (`spare`). A spare that dies unadopted is
started again, at once the first time, then after the respawn backoff; after max_restarts such
deaths in a row the device has no spare and a respawn is a fresh start.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from sidecar.shared.protocol import PARKED, PROTOCOL_VERSION, Message, ProtocolError
from supervisor.pool_health import SpareHealth
from supervisor.settings import SupervisionSettings
from supervisor.supervision.gpu import Device
from supervisor.supervision.process import (
    PLANNED,
    FrameHandler,
    KillReason,
    SidecarProcess,
    SidecarState,
)
from supervisor.supervision.session import Clock
from supervisor.supervision.slot import Slot, SlotState, backoff_delay, resident_bytes

log = logging.getLogger("omnivoice.pool")

# Makes a spare's process (`--park`), its frames going to the handler given.
SpareFactory = Callable[[Device, FrameHandler], SidecarProcess]


@dataclass(eq=False)
class Spare:
    process: SidecarProcess
    parked_at: float | None = None


class Spares:
    """At most one spare per device; the pool calls `tend` every pass and `take` to respawn."""

    def __init__(
        self,
        settings: SupervisionSettings,
        clock: Clock,
        make: SpareFactory | None,
        forward: FrameHandler,
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.make = make  # None: no spares (a pool whose processes are fakes)
        self.forward = forward  # the pool's frame handler, for a spare once adopted
        self.held: dict[str, Spare] = {}  # by device id
        self.deaths: Counter[str] = Counter()  # spares lost unadopted in a row, by device id
        self.retry_at: dict[str, float] = {}
        self.retired: list[SidecarProcess] = []  # stopped or lost; their tasks still to await
        self.pids: list[int] = []  # every spare it ever started

    def wanted(self, device: Device) -> bool:
        mode = self.settings.spare_sidecars
        return self.make is not None and (mode == "on" or (mode == "auto" and device.is_gpu))

    # ------------------------------------------------------------ the pool's pass

    async def tend(self, slots: list[Slot], stopping: bool) -> None:
        """Replace lost spares, start those due, stop those no longer wanted."""
        for slot in slots:
            key = slot.device.id
            spare = self.held.get(key)
            if spare is not None and spare.process.state is SidecarState.DEAD:
                self.lost(key, spare.process)
                spare = None
            if spare is not None and not self.keeps(slot, stopping):
                self.dismiss(key, KillReason.SHUTDOWN if stopping else KillReason.IDLE)
            elif spare is None and self.may_start(slot, stopping):
                await self.start(slot.device)
        for proc in [p for p in self.retired if p.state is SidecarState.DEAD]:
            self.retired.remove(proc)
            await proc.close()

    def keeps(self, slot: Slot, stopping: bool) -> bool:
        """A device keeps its spare while its sidecar runs or is about to be replaced."""
        if stopping or not self.wanted(slot.device):
            return False
        if slot.state is SlotState.BACKOFF:
            return True
        proc = slot.process
        return (
            slot.state is SlotState.ACTIVE and proc is not None and proc.kill_reason not in PLANNED
        )

    def may_start(self, slot: Slot, stopping: bool) -> bool:
        """A spare starts once the device's sidecar is ready, so that the two loads never
        compete, unless spares keep dying (`deaths`) or the last one died too recently."""
        key = slot.device.id
        ready = slot.process is not None and slot.process.state in (
            SidecarState.READY,
            SidecarState.BUSY,
        )
        return (
            ready
            and self.keeps(slot, stopping)
            and self.deaths[key] < self.settings.max_restarts
            and self.clock() >= self.retry_at.get(key, 0.0)
        )

    async def start(self, device: Device) -> None:
        assert self.make is not None
        proc = self.make(device, self.on_frame)
        try:
            await proc.start()
        except OSError as exc:
            self.deaths[device.id] += 1
            log.warning("%s: cannot start a spare: %s", device.id, exc)
            return
        self.held[device.id] = Spare(proc)
        self.pids.append(proc.pid)
        log.info("%s: spare pid %d started", device.id, proc.pid)

    def lost(self, key: str, proc: SidecarProcess) -> None:
        """A spare died before it was needed: start another later, or give up on spares."""
        del self.held[key]
        self.retired.append(proc)
        self.deaths[key] += 1
        delay = backoff_delay(self.settings, self.deaths[key])
        self.retry_at[key] = self.clock() + delay
        if self.deaths[key] >= self.settings.max_restarts:
            log.error(
                "%s: spare pid %d %s; %d in a row, so no more spares for this device",
                key,
                proc.pid,
                proc.exit_description,
                self.deaths[key],
            )
        else:
            log.warning(
                "%s: spare pid %d %s; another in %.1f s",
                key,
                proc.pid,
                proc.exit_description,
                delay,
            )

    def dismiss(self, key: str, reason: KillReason) -> None:
        spare = self.held.pop(key)
        log.info("%s: spare pid %d stopped (%s)", key, spare.process.pid, reason.value)
        spare.process.kill(reason, "not needed")
        self.retired.append(spare.process)

    def take(self, device: Device) -> SidecarProcess | None:
        """The device's spare, told to go on loading, or None when it has none that lives."""
        spare = self.held.pop(device.id, None)
        if spare is None:
            return None
        proc = spare.process
        if proc.state is not SidecarState.STARTING or not proc.send({"op": "go"}):
            proc.kill(KillReason.EXITED, "its pipe was gone when it was needed")
            self.retired.append(proc)
            return None
        now = self.clock()
        parked = f"parked for {now - spare.parked_at:.1f} s" if spare.parked_at else "loading"
        log.info("%s: spare pid %d takes over (%s)", device.id, proc.pid, parked)
        proc.started_at = proc.last_frame_at = now  # its load deadlines count from `go`
        self.deaths[device.id] = 0
        return proc

    def kill_all(self, reason: KillReason = KillReason.SHUTDOWN) -> None:
        for key in list(self.held):
            self.dismiss(key, reason)

    async def close(self) -> None:
        """Stop every spare and wait for their exits (the pool's stop)."""
        self.kill_all()
        for proc in self.retired:
            await proc.close()
        self.retired.clear()

    # ------------------------------------------------------------ frames and health

    def on_frame(self, proc: SidecarProcess, message: Message) -> None:
        """A spare's frames: hello and its load's progress until it is taken, then the pool's."""
        spare = self.held.get(proc.device.id)
        if spare is None or spare.process is not proc:
            if proc not in self.retired:
                self.forward(proc, message)  # adopted: its slot's session takes it from here
            return
        if message["op"] == "hello" and message["protocol"] != PROTOCOL_VERSION:
            raise ProtocolError(
                f"spare speaks protocol {message['protocol']}, we speak {PROTOCOL_VERSION}"
            )
        if message["op"] == "progress" and message["stage"] == PARKED:
            spare.parked_at = self.clock()
            after = spare.parked_at - proc.started_at
            log.info("%s: spare parked, %.1f s after its start", proc.tag, after)
        elif message["op"] == "error" and message["batch"] is None:
            log.error("%s: spare: %s: %s", proc.tag, message["kind"], message["message"])
        elif message["op"] not in ("hello", "progress"):
            raise ProtocolError(f"a spare that was not told to go sent {message['op']!r}")

    def health(self, device: Device) -> SpareHealth | None:
        spare = self.held.get(device.id)
        if spare is None:
            return None
        pid = spare.process.pid
        state = "parked" if spare.parked_at is not None else "loading"
        return {"pid": pid, "state": state, "memory_bytes": resident_bytes(pid)}
