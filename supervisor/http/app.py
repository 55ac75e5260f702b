"""create_app(settings): the routes of supervisor/http/route_table.py, the middleware order, and
the lifespan running the pool.

Errors are rendered outermost (every ServerError in the OpenAI shape, with Retry-After where
it has one); each request's root span and `X-Trace-Id` next (supervisor/tracing/edge.py);
request metrics come next, so that they count refusals too; then the checks of the
request's head (its Host, its framing: supervisor/http/edge.py); then authentication;
then the refusal of new audio while answers wait unread (supervisor/http/connections.py);
then the body limits (each route's own, from the route table); then the routes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import sqlite3
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from supervisor import metrics
from supervisor.database import Database, StoreCorrupt, StoreUnavailable, is_postgres
from supervisor.errors import ServerError, Unavailable, from_http_status
from supervisor.http import openapi, route_table, stream_cut
from supervisor.http.auth import BearerAuth
from supervisor.http.connections import (
    ConnectionBook,
    KeyRequests,
    UnsentLimit,
    descriptor_limit,
)
from supervisor.http.edge import EdgeChecks, allowed_hosts
from supervisor.http.limits import BodyLimit
from supervisor.http.routes.speech import CLIENT_CLOSED
from supervisor.jobs.postgres_store import PostgresJobStore
from supervisor.jobs.runner import JobRunner
from supervisor.jobs.sqlite_store import SqliteJobStore
from supervisor.loop_lag import LagProbe
from supervisor.services import Services
from supervisor.settings import Settings, SidecarSettings, redacted_url
from supervisor.speech.checks import asr_round_trip
from supervisor.speech.stores import result_cache
from supervisor.speech.stores.lexicons import LexiconStore
from supervisor.speech.stores.pg_voices import PgVoiceStore
from supervisor.speech.stores.voices import PromptCache, Voices, VoiceStore
from supervisor.storage_errors import is_storage_failure, storage_error
from supervisor.supervision import gpu, model_check
from supervisor.supervision.asr import AsrPool, asr_devices
from supervisor.supervision.gpu import Device
from supervisor.supervision.pool import Pool
from supervisor.supervision.scheduler import Scheduler
from supervisor.tracing import setup as tracing
from supervisor.tracing.edge import TraceRequests, log_trace_ids, trace_header

log = logging.getLogger("omnivoice.app")

STORE_RETRY_S = 5  # Retry-After while the database cannot be reached


async def render_error(request: Request, exc: Exception) -> JSONResponse:
    if isinstance(exc, HTTPException):
        error: ServerError = from_http_status(exc.status_code, exc.detail)
    elif isinstance(exc, ServerError):
        error = exc
    elif is_storage_failure(exc):  # a full or failing disk, on whatever route met it
        log.error("%s %s: the server's storage failed: %s", request.method, request.url.path, exc)
        error = storage_error(exc, "the request could not be stored")
    elif isinstance(exc, StoreUnavailable):  # jobs with a stopped database; speech carries on
        error = Unavailable(
            f"jobs are unavailable: {exc}. Speech requests still work.", retry_after_s=STORE_RETRY_S
        )
        error.code = "job_store_unavailable"
    else:
        log.exception("unhandled error on %s", request.url.path, exc_info=exc)
        error = ServerError("internal server error")
    headers = {**error.headers(), **trace_header(request.scope)}
    return JSONResponse(error.to_body(), status_code=error.status, headers=headers)


async def client_gone(request: Request, exc: Exception) -> Response:
    """The client went away while its body was read: one line, no traceback, nobody to answer."""
    log.info(
        "%s %s: the client disconnected before its request body was read",
        request.method,
        request.url.path,
    )
    return Response(status_code=CLIENT_CLOSED)


def open_jobs(svc: Services, db: Database | None) -> tuple[JobRunner | None, dict[str, str | None]]:
    """The job runner and the store's state for /health; no runner when the database is damaged
    (the jobs routes then answer 503 and speech carries on)."""
    if db is not None:
        return JobRunner(svc, PostgresJobStore(db, svc.settings.jobs.lease_s)), {
            "state": "ok",
            "error": None,
        }
    try:
        store = SqliteJobStore(svc.settings.resolved_data_dir(), f"port {svc.settings.port}")
    except StoreCorrupt as exc:
        log.error(
            "%s: the jobs routes answer 503 until it is repaired or removed (docs/JOBS.md)", exc
        )
        return None, {"state": "corrupt", "error": str(exc)}
    return JobRunner(svc, store), {"state": "ok", "error": None}


def open_database(settings: Settings) -> Database | None:
    """With --store postgresql://...: the shared database, its schema migrated; else None."""
    if not is_postgres(settings.store):
        return None
    owner = f"{socket.gethostname()} port {settings.port} {uuid.uuid4().hex[:6]}"
    db = Database.open(settings.store, owner)
    log.info("jobs and saved voices in PostgreSQL (%s), as %r", redacted_url(settings.store), owner)
    return db


def random_weights_said(settings: SidecarSettings) -> list[str]:
    """The flags naming a checkpoint with random weights (make-checkpoint's), each said once."""
    random = model_check.random_weights(settings)
    for flag in random:
        log.warning(
            "%s %s has random weights (written by make-checkpoint): its output means nothing%s",
            flag,
            settings.model if flag == "--model" else settings.asr_model,
            "; its checks (wer, divergent_run) are informational: reported, never failing a chunk"
            if flag == "--asr-model"
            else "",
        )
    return random


def create_app(settings: Settings, devices: list[Device] | None = None) -> Starlette:
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        found = (
            devices if devices is not None else gpu.discover(settings.devices, settings.gpu_inferer)
        )
        if tracing.start(settings.server):
            log.info("tracing on: spans to %s", tracing.destination(settings.server))
        scheduler = Scheduler(settings.scheduling)
        pool = Pool(settings.supervision, scheduler, found)
        db = open_database(settings)
        voices: Voices = (
            VoiceStore(Path(settings.resolved_data_dir()) / "voices")
            if db is None
            else PgVoiceStore(db, settings.store)
        )
        lexicon_store = LexiconStore(Path(settings.resolved_data_dir()) / "lexicons")
        asr = Scheduler(settings.scheduling) if settings.asr_model else None
        asr_pool = (
            AsrPool(settings.supervision, asr, asr_devices(found)) if asr is not None else None
        )
        results = await asyncio.to_thread(
            result_cache.open_cache, settings.speech, settings.sidecar
        )
        random = random_weights_said(settings.sidecar)
        app.state.services = Services(
            settings,
            scheduler,
            pool,
            voices,
            PromptCache(settings.clone_cache_size),
            lexicon_store,
            asr,
            asr_pool,
            results,
            asr_round_trip.of_pool(asr_pool, settings.asr_timeout_s, "--asr-model" in random)
            if asr_pool is not None
            else None,
        )
        app.state.jobs, app.state.jobs_health = open_jobs(app.state.services, db)
        collector = metrics.watch(pool, app.state.services.asr_pool)
        lag = LagProbe()
        lag.start()
        if not settings.api_keys:
            log.warning(
                "no --api-key given: every route is open to anyone who can reach %s:%d",
                settings.host,
                settings.port,
            )
        log.info("sidecars on %s (engine %s)", ", ".join(d.name for d in found), settings.engine)
        await pool.start()
        if app.state.services.asr_pool is not None:
            await app.state.services.asr_pool.start()
        if app.state.jobs is not None:
            await app.state.jobs.start()
        try:
            yield
        finally:
            if app.state.jobs is not None:
                await (
                    app.state.jobs.stop()
                )  # job items in flight go back to the queue; they run after the restart
            await pool.stop(settings.drain_s)
            if app.state.services.asr_pool is not None:
                await app.state.services.asr_pool.stop(settings.drain_s)
            if app.state.jobs is not None:
                app.state.jobs.store.close()
            voices.close()
            if db is not None:
                db.close()
            await lag.stop()
            metrics.unwatch(collector)
            tracing.stop()

    stream_cut.install()  # a stream cut on purpose is one line of ours, not uvicorn's too
    routes = route_table.starlette_routes()
    book = ConnectionBook(settings.http, descriptor_limit())  # the server's protocol counts in it
    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(TraceRequests),
            Middleware(metrics.RequestMetrics, routes=routes),
            Middleware(EdgeChecks, allowed=allowed_hosts(settings.http)),
            Middleware(
                BearerAuth, tenancy=settings.tenancy, open_paths=route_table.open_patterns()
            ),
            Middleware(KeyRequests, book=book),
            Middleware(UnsentLimit, book=book),
            Middleware(BodyLimit, limits=route_table.body_limits(settings.http)),
        ],
        exception_handlers={
            ServerError: render_error,
            StoreUnavailable: render_error,
            HTTPException: render_error,
            ClientDisconnect: client_gone,
            # answered here, not re-raised by the outermost handler: a full disk is a 507
            OSError: render_error,
            sqlite3.Error: render_error,
            Exception: render_error,
        },
        lifespan=lifespan,
    )
    app.state.openapi_document = openapi.document(settings)  # settings are frozen: made once
    log_trace_ids()
    app.state.connections = book
    return app
