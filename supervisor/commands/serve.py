"""Run the app under uvicorn with our own signal handling: drain on SIGTERM, then exit 0.

uvicorn on its own closes the listener at the first SIGTERM and re-raises the signal when it
is done, so the process ends "killed by SIGTERM". Here the first SIGTERM or SIGINT starts a
drain instead: systemd hears STOPPING=1, new requests get 503 with Retry-After, work in flight
finishes (for up to --drain-s), the sidecars are shut down, and only then does uvicorn stop.
A second signal stops at once: the sidecars are SIGKILLed, what they ran fails, and the
answers already written go out. When every device has failed, the process exits non-zero
after --failed-exit-s, so that systemd's Restart= can try a fresh start. Under systemd the
server also says READY=1, STATUS= and WATCHDOG=1 (supervisor/commands/sd_notify.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import logging
import os
import re
import signal
import time
from collections.abc import Coroutine, Iterator
from types import FrameType
from typing import Any

import uvicorn
from starlette.applications import Starlette

from supervisor import database as pg
from supervisor.commands import pidfile
from supervisor.commands.sd_notify import Notifier, ServiceState
from supervisor.http import connections
from supervisor.http.app import create_app
from supervisor.http.guarded import Guarded
from supervisor.http.read_deadlines import ReadDeadlines
from supervisor.jobs import sqlite_schema
from supervisor.services import Services
from supervisor.settings import Settings, SupervisionSettings, redacted_url
from supervisor.supervision.slot import SlotState

log = logging.getLogger("omnivoice.server")

EXIT_ALL_FAILED = 1
EXIT_PID_FILE = 2
EXIT_DATA_DIR_BUSY = 2
EXIT_STORE_UNREACHABLE = 2
POOL_ALIVE_S = 10.0  # the pool loop passes every 0.1 s; silent this long, the watchdog stops
ANSWERS_S = 2.0  # after a forced stop, time for the error answers already due to go out


class Server(uvicorn.Server):
    def __init__(
        self,
        config: uvicorn.Config,
        settings: SupervisionSettings,
        app: Starlette,
        notifier: Notifier,
    ) -> None:
        super().__init__(config)
        self.settings = settings
        self.app = app
        self.notifier = notifier
        self.exit_code = 0
        self.draining = False
        self.loop: asyncio.AbstractEventLoop | None = None
        self._background: set[asyncio.Task[None]] = set()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        self.loop = asyncio.get_running_loop()
        self.loop.set_exception_handler(self.app.state.connections.accept_error)
        previous = {
            sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGTERM, signal.SIGINT)
        }
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """Signal handler: only schedules; the work happens in the event loop."""
        if self.draining or self.loop is None:
            self.should_exit = self.force_exit = True
            if self.loop is not None:
                self.loop.call_soon_threadsafe(self.hurry)
            return
        self.draining = True
        self.loop.call_soon_threadsafe(self._spawn, self.drain(signal.Signals(sig).name))

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def services(self) -> Services | None:
        svc: Services | None = getattr(self.app.state, "services", None)  # set by the lifespan
        return svc

    async def drain(self, signame: str) -> None:
        log.info("%s: draining (up to %.0f s), then stopping", signame, self.settings.drain_s)
        self.notifier.stopping(
            f"draining (up to {self.settings.drain_s:g} s): {self.service_state().status}"
        )
        svc = self.services()
        runner = getattr(self.app.state, "jobs", None)
        if runner is not None:  # at once: job items no sidecar has begun go back before one does
            runner.wake()
        if svc is not None:
            await svc.pool.stop(self.settings.drain_s)
        self.should_exit = True

    def hurry(self) -> None:
        log.warning("second signal: stopping at once")
        svc = self.services()
        if svc is not None:
            svc.pool.hurry()

    async def exit_when_all_failed(self) -> None:
        svc = self.services()
        if svc is None:
            return
        await svc.pool.all_failed.wait()
        log.critical("every device has failed; exiting in %.0f s", self.settings.failed_exit_s)
        await asyncio.sleep(self.settings.failed_exit_s)
        self.notifier.stopping(f"every device has failed; exiting with status {EXIT_ALL_FAILED}")
        self.exit_code = EXIT_ALL_FAILED
        self.should_exit = True

    async def startup(self, sockets: list | None = None) -> None:  # type: ignore[type-arg]
        await super().startup(sockets)
        if (
            self.started
        ):  # the port is bound and the pool started: from here on systemd hears from us
            self._spawn(self.exit_when_all_failed())
            self._spawn(self.notifier.run(self.service_state))

    def service_state(self) -> ServiceState:
        """What systemd is told: READY once the first sidecar is ready (or all, --systemd-ready all)."""
        svc = self.services()
        if svc is None:
            return ServiceState(ready=False, loading=True, alive=True, status="starting")
        pool, slots = svc.pool, svc.pool.slots
        num_ready = sum(1 for s in slots if s.public_state in ("ready", "busy"))
        num_usable = sum(1 for s in slots if s.usable)
        status = f"{num_ready}/{len(slots)} sidecars ready, queue {len(svc.scheduler.unfinished)}"
        failed = [s.device.id for s in slots if s.state is SlotState.FAILED]
        if failed:
            status += f", failed: {', '.join(failed)}"
        if pool.draining:
            status = f"draining, {status}"
        elif num_usable == 0:
            status = f"every device has failed, {status}"
        wanted = num_usable if self.settings.systemd_ready == "all" else 1
        ready = num_ready >= max(1, wanted) and not pool.draining
        passed = (
            pool.last_pass_at is not None and time.monotonic() - pool.last_pass_at < POOL_ALIVE_S
        )
        alive = passed or pool.stopping or pool.last_pass_at is None
        return ServiceState(
            ready=ready, loading=num_usable > 0 and not pool.draining, alive=alive, status=status
        )

    async def await_answers(self) -> None:
        """After a forced stop, let handlers write the errors their requests just ended with."""
        deadline = time.monotonic() + ANSWERS_S
        while self.server_state.tasks and time.monotonic() < deadline:
            await asyncio.sleep(0.05)


async def serve(settings: Settings) -> int:
    faulthandler.enable()  # a watchdog SIGABRT then leaves every thread's traceback in the log
    data_dir = settings.resolved_data_dir()
    holder = sqlite_schema.lock_holder(data_dir)
    if holder is not None:  # one line, before anything starts (the job store would refuse later)
        port = re.search(r"port (\d+)", holder)
        log.error(
            "the data directory %s is in use by another server (%s): stop it "
            "(omnivoice-supervisor stop --port %s) or give this one its own --data-dir",
            data_dir,
            holder,
            port[1] if port else "PORT",
        )
        return EXIT_DATA_DIR_BUSY
    problem = pg.unreachable(settings.store) if pg.is_postgres(settings.store) else None
    if problem is not None:  # one line, not the lifespan's traceback
        log.error(
            "the --store database %s cannot be reached (%s): start it, or fix the URL",
            redacted_url(settings.store),
            problem,
        )
        return EXIT_STORE_UNREACHABLE
    connections.raise_descriptor_limit()  # before the app sizes its connection caps on it
    notifier = Notifier.from_environ(
        os.environ
    )  # removed from the environment: sidecars never notify
    app = create_app(settings)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_config=None,
        lifespan="on",
        timeout_graceful_shutdown=max(5, int(settings.stop_timeout_s)),
        # A WebSocket message holds at most the session's text buffer, escaped (\uXXXX and a
        # surrogate pair: 12 bytes a character), and the rest of a session.config.
        ws_max_size=64 * 1024 + 12 * settings.stream_buffer_chars,
        backlog=app.state.connections.backlog,
        http=Guarded.guarding(
            ReadDeadlines.configured(
                settings.header_timeout_s, settings.body_timeout_s, settings.body_deadline_s
            ),
            app.state.connections,
        ),
    )
    server = Server(config, settings.supervision, app, notifier)
    if settings.pid_file:
        try:
            pidfile.write(settings.pid_file)
        except (pidfile.PidFileError, OSError) as exc:
            log.error("cannot write the pid file: %s", exc)
            return EXIT_PID_FILE
    try:
        await server.serve()
    finally:
        svc = server.services()
        if svc is not None:
            await svc.pool.stop(0)  # after a forced exit the lifespan did not run: no sidecar stays
        if server.force_exit and server.started:
            await server.await_answers()
            await (
                server.lifespan.shutdown()
            )  # skipped by uvicorn on a forced exit; the pool is stopped already
        if settings.pid_file:
            pidfile.remove(settings.pid_file)
    if not server.started and server.exit_code == 0:
        return 1
    return server.exit_code
