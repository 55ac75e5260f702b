"""Run the app under uvicorn with our own signal handling: drain on SIGTERM, then exit 0.

uvicorn on its own closes the listener at the first SIGTERM and re-raises the signal when it
is done, so the process ends "killed by SIGTERM". Here the first SIGTERM or SIGINT starts a
drain instead: new requests get 503 with Retry-After, work in flight finishes (for up to
--drain-s), the sidecars are shut down, and only then does uvicorn stop. A second signal
stops at once; the sidecars are still killed. When every device has failed, the process exits
non-zero after --failed-exit-s, so that systemd's Restart= can try a fresh start.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Iterator
from types import FrameType

import uvicorn
from starlette.applications import Starlette

from supervisor.api import Services
from supervisor.app import create_app
from supervisor.settings import Settings

log = logging.getLogger("omnivoice.server")

EXIT_ALL_FAILED = 1


class Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, settings: Settings, app: Starlette) -> None:
        super().__init__(config)
        self.settings = settings
        self.app = app
        self.exit_code = 0
        self.draining = False
        self.loop: asyncio.AbstractEventLoop | None = None
        self._background: set[asyncio.Task[None]] = set()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        self.loop = asyncio.get_running_loop()
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """Signal handler: only schedules; the work happens in the event loop."""
        if self.draining or self.loop is None:
            self.should_exit = self.force_exit = True
            return
        self.draining = True
        self.loop.call_soon_threadsafe(self._spawn, self.drain(signal.Signals(sig).name))

    def _spawn(self, coro: object) -> None:
        task = asyncio.ensure_future(coro)  # type: ignore[arg-type]
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def services(self) -> Services | None:
        svc: Services | None = getattr(self.app.state, "services", None)  # set by the lifespan
        return svc

    async def drain(self, signame: str) -> None:
        log.info("%s: draining (up to %.0f s), then stopping", signame, self.settings.drain_s)
        svc = self.services()
        if svc is not None:
            await svc.pool.stop(self.settings.drain_s)
        self.should_exit = True

    async def exit_when_all_failed(self) -> None:
        svc = self.services()
        if svc is None:
            return
        await svc.pool.all_failed.wait()
        log.critical("every device has failed; exiting in %.0f s", self.settings.failed_exit_s)
        await asyncio.sleep(self.settings.failed_exit_s)
        self.exit_code = EXIT_ALL_FAILED
        self.should_exit = True

    async def startup(self, sockets: list | None = None) -> None:  # type: ignore[type-arg]
        await super().startup(sockets)
        self._spawn(self.exit_when_all_failed())


async def serve(settings: Settings) -> int:
    app = create_app(settings)
    config = uvicorn.Config(app, host=settings.host, port=settings.port, log_config=None, lifespan="on",
                            timeout_graceful_shutdown=max(5, int(settings.stop_timeout_s)))
    server = Server(config, settings, app)
    if settings.pid_file:
        with open(settings.pid_file, "w") as f:
            f.write(f"{os.getpid()}\n")
    try:
        await server.serve()
    finally:
        svc = server.services()
        if svc is not None:
            await svc.pool.stop(0)  # after a forced exit the lifespan did not run: no sidecar stays
        if settings.pid_file:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(settings.pid_file)
    if not server.started and server.exit_code == 0:
        return 1
    return server.exit_code
