"""A pool on a fake clock with fake processes: the arbiter's decisions in milliseconds
(tests/supervisor/supervision/test_pool.py, test_slot.py). A `FakeProcess` is a real
`SidecarProcess` whose start, send and signals are recorded instead of done, and whose exit the
test decides."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Coroutine
from typing import Any

from sidecar.shared.protocol import Message, encode_frame
from supervisor.settings import Settings
from supervisor.supervision.gpu import Device
from supervisor.supervision.pool import Pool
from supervisor.supervision.process import FrameHandler, SidecarProcess, SidecarState
from supervisor.supervision.scheduler import Scheduler
from supervisor.supervision.session import Session

CPU0, CPU1 = Device("cpu0", "cpu", None), Device("cpu1", "cpu", None)
READY: Message = {
    "op": "ready",
    "device": "cpu",
    "model": "m",
    "engine": "null",
    "sample_rate": 24000,
    "memory": {},
}


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FakeProcess(SidecarProcess):
    """No child: frames sent are kept, signals are recorded, the test says when it exits."""

    next_pid = 900_000

    def __init__(
        self, device: Device, on_frame: FrameHandler, wake: Callable[[], None], clock: FakeClock
    ) -> None:
        super().__init__(device, [], {}, 1 << 20, on_frame, wake, clock)
        self.sent: list[dict[str, Any]] = []
        self.signals: list[int] = []

    async def start(self) -> None:
        FakeProcess.next_pid += 1
        self.pid = FakeProcess.next_pid
        self.started_at = self.last_frame_at = self.clock()

    def send(self, message: Any) -> bool:
        if self.state is SidecarState.DEAD:
            return False
        encode_frame(message)  # as the real send does first: an unencodable frame raises
        self.sent.append(message)
        return True

    def _signal_group(self, sig: signal.Signals) -> None:
        self.signals.append(sig)  # never a real signal: the pid is invented

    def frame(self, message: Message) -> None:
        """The sidecar says something (as the reader task would pass it on)."""
        self.last_frame_at = self.clock()
        self.on_frame(self, message)

    def exit(self, returncode: int) -> None:
        self.returncode = returncode
        self.exit_description = f"exited with status {returncode}"
        self.change_state(SidecarState.DEAD)


def fake_settings(**overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "model": "",
        "engine": "null",
        "load_timeout_s": 10.0,
        "load_total_s": 30.0,
        "heartbeat_timeout_s": 3.0,
        "ping_interval_s": 5.0,
        "ping_timeout_s": 2.0,
        "stop_timeout_s": 4.0,
        "backoff_initial_s": 0.5,
        "backoff_max_s": 4.0,
        "restart_window_s": 60.0,
        "max_restarts": 5,
        "max_batch_latency_ms": 0.0,
    }
    values.update(overrides)
    return Settings(**values)


class Arbiter:
    """A pool on a fake clock whose processes are FakeProcess."""

    def __init__(self, settings: Settings, devices: tuple[Device, ...] = (CPU0,)) -> None:
        self.clock = FakeClock()
        self.processes: list[FakeProcess] = []
        self.scheduler = Scheduler(settings.scheduling)
        self.pool = Pool(
            settings.supervision,
            self.scheduler,
            list(devices),
            clock=self.clock,
            make_process=self.make,
        )

    def make(self, device: Device, on_frame: FrameHandler, wake: Callable[[], None]) -> FakeProcess:
        proc = FakeProcess(device, on_frame, wake, self.clock)
        self.processes.append(proc)
        return proc

    def session(self, i: int = 0) -> Session:
        session = self.pool.slots[i].session
        assert session is not None, self.pool.health()
        return session

    def proc(self, i: int = 0) -> FakeProcess:
        proc = self.session(i).process
        assert isinstance(proc, FakeProcess)
        return proc

    async def started(self, ready: bool = True) -> Arbiter:
        for slot in self.pool.slots:
            await self.pool.spawn_sidecar(slot)
        if ready:
            for i in range(len(self.pool.slots)):
                self.proc(i).frame(READY)
        return self

    async def tick(self, advance_s: float = 0.0) -> None:
        self.clock.now += advance_s
        await self.pool.run_once()


def run(scenario: Coroutine[Any, Any, None]) -> None:
    asyncio.run(asyncio.wait_for(scenario, 60))


def item(i: int, text: str = "Hello there.") -> dict[str, Any]:
    return {"id": f"item{i}", "text": text, "seed": i}
