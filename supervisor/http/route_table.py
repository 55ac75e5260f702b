"""Every route, written once: its path, method, handler, body limit, whether it is open, and its
OpenAPI operation (written in supervisor/http/operations.py and job_operations.py).

The app turns ROUTES into Starlette routes (`starlette_routes`), the body limit middleware reads
`body_limits`, authentication reads `open_patterns`, and supervisor/http/openapi.py builds the
document's paths from the operations. A route that takes a body has its own limit: a JSON body
64 KiB and 16 bytes per input character allowed, an upload --max-upload-mb and 1 MiB for the
form around it. A route without an operation (the WebSocket) is not in the OpenAPI document,
which describes HTTP only; the WebSocket checks its key itself (supervisor/http/stream/access.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from starlette.routing import BaseRoute, Route, WebSocketRoute, compile_path

from supervisor.http import job_operations, operations
from supervisor.http.openapi_parts import Operation
from supervisor.http.routes import (
    audiobook_chapters,
    audiobooks,
    captioned,
    console,
    jobs,
    lexicons,
    one_shot,
    ops,
    speech,
    speech_stream,
)
from supervisor.http.routes import voices as voice_routes
from supervisor.settings import HttpSettings
from supervisor.speech.stores import lexicons as lexicon_rules

WEBSOCKET = "WEBSOCKET"  # the method of a WebSocket route

Limit = Callable[[HttpSettings], int]


@dataclass(frozen=True)
class ApiRoute:
    path: str  # Starlette's form: "{name}" for a parameter, "{model:path}" with a convertor
    method: str  # GET, POST, PUT, DELETE, or WEBSOCKET
    endpoint: Callable[..., Any]
    # its OpenAPI operation (supervisor/http/operations.py); None: not in the document
    operation: Operation | None = None
    body_limit: Limit | None = None  # the largest body it takes, in bytes
    open: bool = False  # served without an API key (its OpenAPI operation says `security: []`)


def json_body(settings: HttpSettings) -> int:
    # input and instructions, escaped, and the rest
    return 64 * 1024 + 16 * settings.max_input_chars


def upload_body(settings: HttpSettings) -> int:
    return int(settings.max_upload_mb * 2**20) + 1024 * 1024  # the file and the form around it


def clone_body(settings: HttpSettings) -> int:
    # /v1/audio/clone also takes the file as base64 text (ref_audio_base64)
    return upload_body(settings) * 4 // 3 + json_body(settings)


def jobs_body(settings: HttpSettings) -> int:
    return min(jobs.BODY_CAP, settings.max_job_items * json_body(settings))


def lexicon_body(settings: HttpSettings) -> int:
    return lexicon_rules.MAX_BODY_BYTES


_captions = (("srt", "application/x-subrip"), ("vtt", "text/vtt"))

ROUTES: tuple[ApiRoute, ...] = (
    ApiRoute(
        "/",
        "GET",
        console.page,
        open=True,
        operation=operations.console,
    ),
    ApiRoute(
        "/console",
        "GET",
        console.page,
        open=True,
        operation=operations.console_page,
    ),
    ApiRoute(
        "/console/{asset}",
        "GET",
        console.asset,
        open=True,
        operation=operations.console_asset,
    ),
    ApiRoute(
        "/health",
        "GET",
        ops.health,
        open=True,
        operation=operations.health,
    ),
    ApiRoute(
        "/ready",
        "GET",
        ops.ready,
        open=True,
        operation=operations.ready,
    ),
    ApiRoute(
        "/metrics",
        "GET",
        ops.prometheus,
        operation=operations.metrics,
    ),
    ApiRoute(
        "/openapi.json",
        "GET",
        ops.openapi_json,
        operation=operations.openapi,
    ),
    ApiRoute(
        "/v1/models",
        "GET",
        ops.list_models,
        operation=operations.list_models,
    ),
    ApiRoute(
        "/v1/models/{model:path}",
        "GET",
        ops.get_model,
        operation=operations.retrieve_model,
    ),
    ApiRoute(
        "/v1/audio/speech",
        "POST",
        speech.speech,
        body_limit=json_body,
        operation=operations.create_speech,
    ),
    ApiRoute(
        "/v1/audio/speech/captioned",
        "POST",
        captioned.captioned,
        body_limit=json_body,
        operation=operations.create_captioned_speech,
    ),
    ApiRoute("/v1/audio/speech/stream", WEBSOCKET, speech_stream.stream),
    ApiRoute(
        "/v1/audio/design",
        "POST",
        one_shot.design,
        body_limit=json_body,
        operation=operations.design_speech,
    ),
    ApiRoute(
        "/v1/audio/clone",
        "POST",
        one_shot.clone,
        body_limit=clone_body,
        operation=operations.clone_speech,
    ),
    ApiRoute(
        "/v1/audio/voices",
        "GET",
        voice_routes.list_voices,
        operation=operations.list_voices,
    ),
    ApiRoute(
        "/v1/audio/voices",
        "POST",
        voice_routes.create_voice,
        body_limit=upload_body,
        operation=operations.create_voice,
    ),
    ApiRoute(
        "/v1/audio/voices/{name}",
        "GET",
        voice_routes.get_voice,
        operation=operations.get_voice,
    ),
    ApiRoute(
        "/v1/audio/voices/{name}",
        "DELETE",
        voice_routes.delete_voice,
        operation=operations.delete_voice,
    ),
    ApiRoute(
        "/v1/audio/lexicons",
        "GET",
        lexicons.list_lexicons,
        operation=operations.list_lexicons,
    ),
    ApiRoute(
        "/v1/audio/lexicons/{name}",
        "GET",
        lexicons.get_lexicon,
        operation=operations.get_lexicon,
    ),
    ApiRoute(
        "/v1/audio/lexicons/{name}",
        "PUT",
        lexicons.put_lexicon,
        body_limit=lexicon_body,
        operation=operations.put_lexicon,
    ),
    ApiRoute(
        "/v1/audio/lexicons/{name}",
        "DELETE",
        lexicons.delete_lexicon,
        operation=operations.delete_lexicon,
    ),
    ApiRoute(
        "/v1/cache",
        "DELETE",
        ops.purge_cache,
        operation=operations.purge_cache,
    ),
    ApiRoute(
        "/v1/jobs",
        "POST",
        jobs.create_job,
        body_limit=jobs_body,
        operation=job_operations.create_job,
    ),
    ApiRoute(
        "/v1/jobs",
        "GET",
        jobs.list_jobs,
        operation=job_operations.list_jobs,
    ),
    ApiRoute(
        "/v1/jobs/{job_id}",
        "GET",
        jobs.get_job,
        operation=job_operations.get_job,
    ),
    ApiRoute(
        "/v1/jobs/{job_id}",
        "DELETE",
        jobs.cancel_job,
        operation=job_operations.cancel_job,
    ),
    ApiRoute(
        "/v1/jobs/{job_id}/items/{n}/audio",
        "GET",
        jobs.item_audio,
        operation=job_operations.get_job_item_audio,
    ),
    *(
        ApiRoute(
            f"/v1/jobs/{{job_id}}/items/{{n}}/captions.{kind}",
            "GET",
            jobs.item_captions,
            operation=job_operations.job_item_captions(kind, media),
        )
        for kind, media in _captions
    ),
    *(
        ApiRoute(path, method, handler, op, limit)
        for path, method, handler, op, limit in (*audiobooks.ROUTES, *audiobook_chapters.ROUTES)
    ),
)


def starlette_routes() -> list[BaseRoute]:
    """The table as Starlette routes, in its order."""
    return [
        WebSocketRoute(r.path, r.endpoint)
        if r.method == WEBSOCKET
        else Route(r.path, r.endpoint, methods=[r.method])
        for r in ROUTES
    ]


def body_limits(settings: HttpSettings) -> list[tuple[re.Pattern[str], str, int]]:
    """(the path's pattern, the method, its largest body in bytes) for each route that takes one."""
    return [
        (compile_path(r.path)[0], r.method, r.body_limit(settings))
        for r in ROUTES
        if r.body_limit is not None
    ]


def open_patterns() -> list[re.Pattern[str]]:
    """The paths served without an API key, whatever the method."""
    return [compile_path(r.path)[0] for r in ROUTES if r.open]
