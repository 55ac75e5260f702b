"""`/health` and `/ready` (always open, always answer), `/v1/models`, `/metrics`, `/openapi.json`."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from supervisor import metrics, openapi
from supervisor.api import services
from supervisor.auth import AUTHENTICATED_KEY
from supervisor.errors import NotFound
from supervisor.schemas import MODELS

MODELS_CREATED = (
    1764460800  # a fixed timestamp (2025-11-30), so the list is the same after every restart
)


async def health(request: Request) -> JSONResponse:
    """Overall status and one entry per sidecar (see DESIGN, Contracts in detail), and the job
    store's state. Without a valid key (on a server that has keys): states and counts only, no
    pids, paths or settings."""
    svc = services(request)
    body = svc.pool.health()
    body["jobs"] = request.app.state.jobs_health
    if request.scope.get(AUTHENTICATED_KEY, True):
        body["settings"] = svc.settings.public()
    else:
        for sidecar in body["sidecars"]:
            sidecar["pid"] = None
    return JSONResponse(body)


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
    return Response(metrics.render(), media_type=metrics.CONTENT_TYPE)


async def openapi_json(request: Request) -> JSONResponse:
    return JSONResponse(openapi.document(services(request).settings))
