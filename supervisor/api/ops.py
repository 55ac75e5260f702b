"""`/health` and `/ready`: always open, always answer, whatever state the sidecars are in."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse

from supervisor.api import services


async def health(request: Request) -> JSONResponse:
    """Overall status and one entry per sidecar (see DESIGN, Contracts in detail)."""
    svc = services(request)
    body = svc.pool.health()
    body["settings"] = svc.settings.public()
    return JSONResponse(body)


async def ready(request: Request) -> JSONResponse:
    """200 when a sidecar can take work (or a reaped one can be started), else 503."""
    pool = services(request).pool
    if pool.is_ready():
        return JSONResponse({"ready": True, "status": pool.status()})
    return JSONResponse({"ready": False, "status": pool.status()}, status_code=503, headers={"Retry-After": "5"})
