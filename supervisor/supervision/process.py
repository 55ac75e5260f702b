"""One sidecar child as the supervisor sees it: spawn, read its frames, send frames, kill, reap.

The child is exec'ed (never forked: CUDA does not survive a fork) in a new session, so that
its pid is also its process group, and `kill` can SIGKILL the whole group: a wedged CUDA call
ignores SIGTERM, and a SIGSTOPped process ignores everything but SIGKILL. A reader task stamps
`last_frame_at` with the monotonic clock for every frame; the pool reads that stamp to enforce
its deadlines and never has to ask. After a kill, or after a malformed frame, the pipe is never
read again: nothing late can be taken for the answer to something else.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import os
import signal
import time
from collections.abc import Callable

from sidecar.shared.protocol import (
    FROM_SIDECAR,
    ExitCode,
    Message,
    ProtocolError,
    encode_frame,
    read_frame_async,
)
from supervisor.supervision.gpu import Device

log = logging.getLogger("omnivoice.process")
sidecar_log = logging.getLogger("omnivoice.sidecar")

STDERR_CHUNK = 65536
READER_LIMIT = 1024 * 1024
DRAIN_AFTER_EXIT_S = 2.0


class SidecarState(str, enum.Enum):
    STARTING = "starting"  # exec'ed; loading until it sends `ready`
    READY = "ready"  # idle, can take a batch
    BUSY = "busy"  # one to three batches in flight (Session.room_ahead)
    STOPPING = "stopping"  # asked to shut down, or killed; waiting for the exit
    DEAD = "dead"  # exited and reaped; its frames have all been read


TRANSITIONS: dict[SidecarState, frozenset[SidecarState]] = {
    SidecarState.STARTING: frozenset(
        {SidecarState.READY, SidecarState.STOPPING, SidecarState.DEAD}
    ),
    SidecarState.READY: frozenset({SidecarState.BUSY, SidecarState.STOPPING, SidecarState.DEAD}),
    SidecarState.BUSY: frozenset({SidecarState.READY, SidecarState.STOPPING, SidecarState.DEAD}),
    SidecarState.STOPPING: frozenset({SidecarState.DEAD}),
    SidecarState.DEAD: frozenset(),
}


class KillReason(str, enum.Enum):
    """Why a sidecar ended; the label in logs, /health and metrics."""

    LOAD_TIMEOUT = "load_timeout"
    HEARTBEAT_TIMEOUT = "heartbeat_timeout"
    PING_TIMEOUT = "ping_timeout"
    PROTOCOL_ERROR = "protocol_error"
    EXITED = "exited"  # it died on its own
    SHUTDOWN = "shutdown"
    IDLE = "idle"


PLANNED = frozenset({KillReason.SHUTDOWN, KillReason.IDLE})
FrameHandler = Callable[["SidecarProcess", Message], None]  # called for every valid frame
# How the pool makes a sidecar process (a seam: tests pass fakes): device, on_frame, wake.
ProcessFactory = Callable[[Device, FrameHandler, Callable[[], None]], "SidecarProcess"]


def decode_exit(returncode: int, killed_by_us: bool) -> str:
    """A wait status in words, for the log and /health."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        hint = " (perhaps out of memory?)" if name == "SIGKILL" and not killed_by_us else ""
        return f"killed by {name}{hint}"
    try:
        meaning = f" ({ExitCode(returncode).name.lower().replace('_', ' ')})"
    except ValueError:
        meaning = ""
    return f"exited with status {returncode}{meaning}"


class SidecarProcess:
    """The parent's handle on one sidecar process."""

    def __init__(  # noqa: PLR0913  the child's command and environment, and the hooks and clock tests inject
        self,
        device: Device,
        argv: list[str],
        env: dict[str, str],
        max_frame_bytes: int,
        on_frame: FrameHandler,
        wake: Callable[[], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.device = device
        self.argv = argv
        self.env = env
        self.max_frame_bytes = max_frame_bytes
        self.on_frame = on_frame
        self.wake = wake
        self.clock = clock
        self.state = SidecarState.STARTING
        self.pid = 0
        self.started_at = self.last_frame_at = clock()
        self.stop_deadline: float | None = None
        self.kill_reason: KillReason | None = None
        self.kill_detail = ""
        self.returncode: int | None = None
        self.exit_description = ""
        self._proc: asyncio.subprocess.Process | None = None
        self._tasks: list[asyncio.Task[None]] = []

    def __repr__(self) -> str:
        return f"<SidecarProcess {self.device.id} pid {self.pid} {self.state.value}>"

    @property
    def tag(self) -> str:
        return f"{self.device.id} pid {self.pid}"

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        self._proc = await asyncio.create_subprocess_exec(
            *self.argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self.env,
            start_new_session=True,
            limit=READER_LIMIT,
        )
        self.pid = self._proc.pid
        self.started_at = self.last_frame_at = self.clock()
        log.info("%s: started on %s", self.tag, self.device.name)
        reader = asyncio.create_task(self._read_frames(), name=f"{self.device.id}-frames")
        self._tasks = [
            reader,
            asyncio.create_task(self._forward_stderr(), name=f"{self.device.id}-stderr"),
            asyncio.create_task(self._wait_exit(reader), name=f"{self.device.id}-wait"),
        ]

    def change_state(self, new: SidecarState) -> None:
        if new not in TRANSITIONS[self.state]:
            raise RuntimeError(f"{self.tag}: no transition {self.state.value} -> {new.value}")
        log.debug("%s: %s -> %s", self.tag, self.state.value, new.value)
        self.state = new

    def send(self, message: Message) -> bool:
        """Queue one frame for the child; False if its stdin is already gone.

        Never blocks: a SIGSTOPped child cannot stall the pool, whose deadlines kill it.
        """
        if (
            self.state is SidecarState.DEAD
            or self._proc is None
            or self._proc.stdin is None
            or self._proc.stdin.is_closing()
        ):
            return False
        self._proc.stdin.write(encode_frame(message, self.max_frame_bytes))
        return True

    def stop(self, reason: KillReason, timeout_s: float) -> None:
        """Ask for an orderly exit; `kill` follows if it has not exited by the deadline."""
        if self.state in (SidecarState.STOPPING, SidecarState.DEAD):
            return
        self.kill_reason = reason
        if self.state is SidecarState.STARTING:
            self.kill(reason, "stopped while loading")  # it reads no frame until it is loaded
            return
        self.send({"op": "shutdown"})
        self.stop_deadline = self.clock() + timeout_s
        self.change_state(SidecarState.STOPPING)

    def kill(self, reason: KillReason, detail: str = "") -> None:
        """SIGKILL the whole process group. The first reason given is the one recorded."""
        if self.kill_reason is None or (self.kill_reason in PLANNED and reason not in PLANNED):
            self.kill_reason = reason
            self.kill_detail = detail
        if self.state is SidecarState.DEAD:
            return
        self._signal_group(signal.SIGKILL)
        self.stop_deadline = None
        if self.state is not SidecarState.STOPPING:
            self.change_state(SidecarState.STOPPING)
        self.wake()

    def _signal_group(self, sig: signal.Signals) -> None:
        try:
            os.killpg(self.pid, sig)
        except ProcessLookupError:
            pass
        except PermissionError as exc:  # the group id was reused by someone else's process
            log.warning("%s: cannot signal process group: %s", self.tag, exc)

    # ------------------------------------------------------------ tasks

    async def _read_frames(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        stdout = self._proc.stdout
        while True:
            try:
                message = await read_frame_async(stdout, self.max_frame_bytes, FROM_SIDECAR)
            except ProtocolError as exc:
                log.warning("%s: protocol error: %s", self.tag, exc)
                self.kill(KillReason.PROTOCOL_ERROR, f"protocol error: {exc}")
                return
            if message is None:
                return
            if self.kill_reason is not None and self.kill_reason not in PLANNED:
                return  # killed: whatever it still says is not to be believed
            self.last_frame_at = self.clock()
            try:
                self.on_frame(self, message)
            except ProtocolError as exc:
                log.warning("%s: protocol error: %s", self.tag, exc)
                self.kill(KillReason.PROTOCOL_ERROR, f"protocol error: {exc}")
                return
            except Exception:
                log.exception(
                    "%s: handling a %r frame failed; killing the sidecar",
                    self.tag,
                    message.get("op"),
                )
                self.kill(
                    KillReason.PROTOCOL_ERROR, "the supervisor could not handle one of its frames"
                )
                return

    async def _forward_stderr(self) -> None:
        """Each line of the child's stderr goes to the log, tagged with its id and pid."""
        assert self._proc is not None and self._proc.stderr is not None
        pending = b""
        while True:
            chunk = await self._proc.stderr.read(STDERR_CHUNK)
            if not chunk:
                break
            lines = (pending + chunk).split(b"\n")
            pending = lines.pop()
            if len(pending) > STDERR_CHUNK:
                lines.append(pending)
                pending = b""
            for line in lines:
                sidecar_log.info("[%s] %s", self.tag, line.decode("utf-8", "replace").rstrip())
        if pending:
            sidecar_log.info("[%s] %s", self.tag, pending.decode("utf-8", "replace").rstrip())

    async def _wait_exit(self, reader: asyncio.Task[None]) -> None:
        assert self._proc is not None
        self.returncode = await self._proc.wait()
        # Anything the leader left in its group (compiler workers, say) goes with it.
        self._signal_group(signal.SIGKILL)
        try:
            await asyncio.wait_for(asyncio.shield(reader), DRAIN_AFTER_EXIT_S)
        except asyncio.TimeoutError:
            reader.cancel()
        self.exit_description = decode_exit(
            self.returncode, killed_by_us=self.kill_reason is not None
        )
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        self.change_state(SidecarState.DEAD)  # every live state may end here
        self.wake()

    async def close(self) -> None:
        """Wait for the helper tasks after death (tests and shutdown call this)."""
        await asyncio.gather(*self._tasks, return_exceptions=True)
