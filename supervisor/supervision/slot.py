"""One device's slot in the pool: its state, and the bookkeeping that outlives each sidecar.

A slot's life, on top of its process's own states (process.SidecarState):

    ACTIVE --death--> BACKOFF --delay, memory back--> ACTIVE
    ACTIVE --idle--> REAPED --work arrives--> ACTIVE
    ACTIVE/BACKOFF --restart intensity, load error, memory never back--> FAILED
    BACKOFF --spawn short of a resource (EMFILE, ENFILE, ENOMEM, EAGAIN)--> BACKOFF
    any --pool stops--> STOPPED

`record_death` is the restart policy (restart intensity, then exponential backoff); it reads
no clock of its own, so it is tested with plain numbers.
"""

from __future__ import annotations

import enum
import errno
import logging
from collections import Counter, deque
from dataclasses import dataclass, field

import psutil

from sidecar.shared.protocol import ExitCode
from supervisor.pool_health import SidecarHealth
from supervisor.settings import SupervisionSettings
from supervisor.supervision import gpu
from supervisor.supervision.gpu import Device
from supervisor.supervision.process import SidecarProcess, SidecarState
from supervisor.supervision.session import Clock, Loaded, Session

log = logging.getLogger("omnivoice.pool")


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
    SlotState.BACKOFF: frozenset(
        {SlotState.ACTIVE, SlotState.BACKOFF, SlotState.FAILED, SlotState.STOPPED}
    ),
    SlotState.REAPED: frozenset(
        {SlotState.ACTIVE, SlotState.BACKOFF, SlotState.FAILED, SlotState.STOPPED}
    ),
    SlotState.FAILED: frozenset({SlotState.STOPPED}),
    SlotState.STOPPED: frozenset(),
}


# A spawn that fails for want of a resource the system may have again soon.
TRANSIENT_SPAWN_ERRORS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.EAGAIN})


def resident_bytes(pid: int | None) -> int | None:
    """A sidecar's resident memory (host RAM; GPU memory is the gpu_memory_peak_bytes metric)."""
    if pid is None:
        return None
    try:
        return int(psutil.Process(pid).memory_info().rss)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def backoff_delay(settings: SupervisionSettings, failures_in_row: int) -> float:
    """The first respawn is at once; then backoff_initial_s, doubling up to backoff_max_s."""
    if failures_in_row <= 1:
        return 0.0
    return min(settings.backoff_max_s, settings.backoff_initial_s * 2.0 ** (failures_in_row - 2))


@dataclass(eq=False)
class Slot:
    """One device and the bookkeeping that outlives each of its sidecars."""

    device: Device
    state: SlotState = SlotState.BACKOFF
    session: Session | None = None
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

    @property
    def process(self) -> SidecarProcess | None:
        return self.session.process if self.session is not None else None

    def change_state(self, new: SlotState, why: str = "") -> None:
        if new not in SLOT_TRANSITIONS[self.state]:
            raise RuntimeError(f"{self.device.id}: no transition {self.state.value} -> {new.value}")
        level = logging.ERROR if new is SlotState.FAILED else logging.INFO
        because = f" ({why})" if why else ""
        log.log(level, "%s: %s -> %s%s", self.device.id, self.state.value, new.value, because)
        self.state = new

    async def start(
        self, proc: SidecarProcess, clock: Clock, settings: SupervisionSettings
    ) -> None:
        """Start a sidecar process in this slot. A spawn short of a resource (descriptors,
        memory, processes) is a death like any other: back off and try again, within the
        restart intensity; any other reason it cannot be exec'ed fails the slot."""
        try:
            await proc.start()
        except OSError as exc:
            self.last_error = f"cannot start a sidecar: {exc}"
            if exc.errno in TRANSIENT_SPAWN_ERRORS:
                log.warning("%s: %s; trying again after a back-off", self.device.id, exc)
                self.record_death(settings, clock(), 0)
            else:
                self.change_state(SlotState.FAILED, self.last_error)
            return
        self.adopt(proc, clock)

    def adopt(self, proc: SidecarProcess, clock: Clock) -> None:
        """Hold a started sidecar process: a fresh one, or a spare told to go (spare.py)."""
        self.session = Session(proc, clock)
        self.pids.append(proc.pid)
        self.change_state(SlotState.ACTIVE, f"pid {proc.pid}")

    def loaded(self, event: Loaded, now: float) -> None:
        """Its sidecar is ready: the failures in a row are over."""
        self.failures_in_row = 0
        since = "" if self.died_at is None else f", {now - self.died_at:.2f} s after the last died"
        log.info(
            "%s pid %d: ready in %.2f s%s (%s)",
            self.device.id,
            self.pids[-1],
            event.load_s,
            since,
            event.info["memory"],
        )

    def after_death(self, session: Session, settings: SupervisionSettings, now: float) -> None:
        """After an unplanned death: back off, or give up on the device."""
        proc = session.process
        self.last_error = proc.kill_detail or proc.exit_description
        if session.reported_error:
            self.last_error += f": {session.reported_error}"
        if proc.returncode == ExitCode.LOAD_ERROR and session.ready_at is None:
            self.change_state(SlotState.FAILED, f"the model cannot be loaded: {self.last_error}")
            return
        self.record_death(settings, now, proc.pid)

    def record_death(self, settings: SupervisionSettings, now: float, pid: int) -> None:
        """An unplanned death at `now`: back off, or fail once restart intensity is reached."""
        self.restart_times.append(now)
        while self.restart_times and self.restart_times[0] < now - settings.restart_window_s:
            self.restart_times.popleft()
        if len(self.restart_times) > settings.max_restarts:
            self.last_error = (
                f"restart intensity reached: {len(self.restart_times)} deaths within "
                f"{settings.restart_window_s:g} s; last: {self.last_error}"
            )
            self.change_state(SlotState.FAILED, self.last_error)
            return
        self.restarts += 1
        self.failures_in_row += 1
        delay = backoff_delay(settings, self.failures_in_row)
        self.respawn_at = now + delay
        self.dead_pid, self.died_at, self.memory_deadline = pid, now, None
        self.change_state(SlotState.BACKOFF, f"respawn in {delay:.1f} s")

    def memory_is_back(self, settings: SupervisionSettings, now: float) -> bool:
        """On a GPU, a new sidecar starts only once the dead one's memory has been released;
        if it is not back by memory_reclaim_s, the slot fails."""
        if self.device.index is None or self.died_at is None:
            return True
        if self.memory_deadline is None:
            self.memory_deadline = now + settings.memory_reclaim_s
        slack = settings.memory_slack_mb * 2**20
        back, figures = gpu.memory_is_back(
            self.device.index, self.dead_pid, self.memory_before_start, slack
        )
        if back is not False:
            log.info(
                "%s: memory back %.2f s after the death (%s)",
                self.device.id,
                now - self.died_at,
                figures,
            )
            return True
        if now > self.memory_deadline:
            self.last_error = (
                f"GPU memory did not come back within {settings.memory_reclaim_s:g} s: {figures}"
            )
            self.change_state(SlotState.FAILED, self.last_error)
        return False

    def health(self) -> SidecarHealth:
        """Its entry in /health's `sidecars`."""
        return {
            "id": self.device.id,
            "device": self.device.name,
            "pid": self.process.pid if self.process is not None else None,
            "state": self.public_state,
            "restarts": self.restarts,
            "kills": dict(self.kills),
            "last_kill": self.last_kill,
            "last_error": self.last_error,
            "memory_bytes": resident_bytes(self.process.pid if self.process else None),
        }

    @property
    def public_state(self) -> str:
        """The state /health shows: starting|ready|busy|reaped|backoff|failed|stopping."""
        if self.state is SlotState.ACTIVE and self.process is not None:
            return (
                "stopping" if self.process.state is SidecarState.DEAD else self.process.state.value
            )
        return {SlotState.STOPPED: "stopping"}.get(self.state, self.state.value)

    @property
    def usable(self) -> bool:
        return self.state not in (SlotState.FAILED, SlotState.STOPPED)
