"""create_app(settings): the route table, the middleware order, and the lifespan running the pool.

Errors are rendered outermost (every ServerError in the OpenAI shape, with Retry-After where
it has one); authentication comes next; then the routes.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from supervisor import gpu
from supervisor.api import Services, ops, speech
from supervisor.auth import BearerAuth
from supervisor.errors import InvalidRequest, ServerError
from supervisor.gpu import Device
from supervisor.pool import Pool
from supervisor.scheduler import Scheduler
from supervisor.settings import Settings

log = logging.getLogger("omnivoice.app")


async def render_error(request: Request, exc: Exception) -> JSONResponse:
    if isinstance(exc, HTTPException):
        error: ServerError = InvalidRequest(exc.detail)
        error.status = exc.status_code
        error.code = None
    elif isinstance(exc, ServerError):
        error = exc
    else:
        log.exception("unhandled error on %s", request.url.path, exc_info=exc)
        error = ServerError("internal server error")
    return JSONResponse(error.to_body(), status_code=error.status, headers=error.headers())


def create_app(settings: Settings, devices: list[Device] | None = None) -> Starlette:
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        found = devices if devices is not None else gpu.discover(settings.devices)
        scheduler = Scheduler(settings)
        pool = Pool(settings, scheduler, found)
        app.state.services = Services(settings, scheduler, pool)
        if not settings.api_keys:
            log.warning("no --api-key given: every route is open to anyone who can reach %s:%d", settings.host, settings.port)
        log.info("sidecars on %s (engine %s)", ", ".join(d.name for d in found), settings.engine)
        await pool.start()
        try:
            yield
        finally:
            await pool.stop(settings.drain_s)

    routes = [
        Route("/health", ops.health, methods=["GET"]),
        Route("/ready", ops.ready, methods=["GET"]),
        Route("/v1/audio/speech", speech.speech, methods=["POST"]),
    ]
    return Starlette(
        routes=routes,
        middleware=[Middleware(BearerAuth, keys=settings.api_keys)],
        exception_handlers={ServerError: render_error, HTTPException: render_error, Exception: render_error},
        lifespan=lifespan,
    )
