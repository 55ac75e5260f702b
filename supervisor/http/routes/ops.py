"""`/health` and `/ready` (always open, always answer), `/v1/models`, `/metrics`, `/openapi.json`,
and `DELETE /v1/cache` (empties the result cache)."""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from supervisor import metrics
from supervisor.errors import Forbidden, NotFound
from supervisor.http.auth import AUTHENTICATED_KEY, TENANT, tenant
from supervisor.http.routes import services
from supervisor.pool_health import SlotHealth
from supervisor.speech.request.schemas import MODELS
from supervisor.tenants import Tenant

# The settings that name where the server keeps its files: an admin's or the operator's to see.
PATHS = frozenset(
    {
        "api_key_file",
        "data_dir",
        "pid_file",
        "log_dir",
        "log_file",
        "compile_cache_dir",
        "cache_dir",
        "test_fault_dir",
    }
)
MODELS_CREATED = (
    1764460800  # a fixed timestamp (2025-11-30), so the list is the same after every restart
)


async def health(request: Request) -> JSONResponse:
    """Overall status and one entry per sidecar (see DESIGN, Contracts in detail), and the job
    store's kind and state (ok, corrupt, unavailable while it refuses writes or cannot be
    reached, or waiting_for_space while a full disk holds items back). Without a valid key (on
    a server that has keys): states and counts only, no pids, paths or settings."""
    svc = services(request)
    pool = svc.pool.health()
    asr = svc.asr_pool.health()["sidecars"] if svc.asr_pool is not None else None
    jobs = {**request.app.state.jobs_health, "store": svc.settings.jobs.store.split(":")[0]}
    runner = request.app.state.jobs
    if runner is not None and runner.storage_error is not None:  # a full disk, a stopped database
        jobs.update(state="unavailable", error=runner.storage_error)
    elif runner is not None and runner.space.waiting:  # a full disk refused a result
        jobs.update(state="waiting_for_space", waiting_for_space=runner.space.report())
    body: dict[str, object] = {**pool, "jobs": jobs}
    if asr is not None:  # the ASR sidecar (--asr-model), beside the contract's list
        body["asr"] = asr
    if (
        svc.hearing is not None
    ):  # whether speech is heard back now (supervisor/speech/checks/asr_round_trip.py)
        body["asr_check"] = "on" if svc.hearing.can_hear() else "skipped"
    if request.scope.get(AUTHENTICATED_KEY, True):
        settings = svc.settings.public()
        sees = sees_server(request)
        if not sees:  # a tenant's key: the settings, but not where the server keeps its files
            settings = {name: value for name, value in settings.items() if name not in PATHS}
        body["settings"] = settings
        if sees:
            body["connections"] = request.app.state.connections.health()
    else:
        hide_pids([*pool["sidecars"], *(asr or [])])
        if jobs.get("waiting_for_space"):  # its error may name a path
            jobs["waiting_for_space"] = {**jobs["waiting_for_space"], "error": None}
    return JSONResponse(body)


def sees_server(request: Request) -> bool:
    """Whether the caller sees the server's paths and global counters (tenants.Tenancy)."""
    found: Tenant | None = request.scope.get(TENANT)
    return found is not None and services(request).settings.tenancy.sees_server(found)


def hide_pids(sidecars: list[SlotHealth]) -> None:
    """/health's sidecar entries as a client without a key sees them: no pid, nor a spare's."""
    for sidecar in sidecars:
        sidecar["pid"] = None
        spare = sidecar["spare"]
        if spare is not None:
            sidecar["spare"] = {**spare, "pid": None}


async def ready(request: Request) -> JSONResponse:
    """200 when a sidecar can take work (or a reaped one can be started), else 503."""
    pool = services(request).pool
    if pool.is_ready():
        return JSONResponse({"ready": True, "status": pool.status()})
    return JSONResponse(
        {"ready": False, "status": pool.status()}, status_code=503, headers={"Retry-After": "5"}
    )


def model_entry(model_id: str) -> dict[str, object]:
    return {
        "id": model_id,
        "object": "model",
        "created": MODELS_CREATED,
        "owned_by": "omnivoice-supervisor",
    }


async def list_models(request: Request) -> JSONResponse:
    """Every model name the speech route accepts; all of them are the one OmniVoice model."""
    return JSONResponse({"object": "list", "data": [model_entry(m) for m in MODELS]})


async def get_model(request: Request) -> JSONResponse:
    model_id = request.path_params["model"]
    if model_id not in MODELS:
        raise NotFound(
            f"The model {model_id!r} does not exist; this server serves {', '.join(MODELS)}.",
            param="model",
        )
    return JSONResponse(model_entry(model_id))


async def prometheus(request: Request) -> Response:
    """Every metric is the whole server's: for an admin key or the operator's (sees_server)."""
    if not sees_server(request):
        raise Forbidden(
            "the metrics are the whole server's: they need an admin key, or a key given "
            "with --api-key"
        )
    return Response(metrics.render(), media_type=metrics.CONTENT_TYPE)


async def openapi_json(request: Request) -> JSONResponse:
    document: dict[str, object] = request.app.state.openapi_document  # made by create_app
    return JSONResponse(document)


async def purge_cache(request: Request) -> JSONResponse:
    """Remove the key's entries of the result cache (an admin key's: every entry): how many,
    and their bytes."""
    results, owner = services(request).results, tenant(request).scope
    deleted, size = (0, 0) if results is None else await asyncio.to_thread(results.purge, owner)
    return JSONResponse(
        {"object": "cache.purge", "enabled": results is not None, "deleted": deleted, "bytes": size}
    )
