"""Every route, written once: its path, method, handler, body limit, whether it is open, and its
OpenAPI operation.

The app turns ROUTES into Starlette routes (`starlette_routes`), the body limit middleware reads
`body_limits`, authentication reads `open_patterns`, and supervisor/http/openapi.py builds the
document's paths from the operations. A route that takes a body has its own limit: a JSON body
64 KiB and 16 bytes per input character allowed, an upload --max-upload-mb and 1 MiB for the
form around it. A route without an operation (the WebSocket) is not in the OpenAPI document,
which describes HTTP only; the WebSocket checks its key itself (supervisor/http/stream_access.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from starlette.routing import BaseRoute, Route, WebSocketRoute, compile_path

from supervisor.http.openapi_parts import (
    CONSOLE_PAGE,
    SPEECH_ERRORS,
    Parts,
    error,
    form,
    json_ref,
    responses,
)
from supervisor.http.routes import (
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
from supervisor.jobs import callbacks
from supervisor.settings import Settings
from supervisor.speech import formats
from supervisor.speech import lexicons as lexicon_rules

WEBSOCKET = "WEBSOCKET"  # the method of a WebSocket route

Operation = Callable[[Parts], dict[str, Any]]
Limit = Callable[[Settings], int]


@dataclass(frozen=True)
class ApiRoute:
    path: str  # Starlette's form: "{name}" for a parameter, "{model:path}" with a convertor
    method: str  # GET, POST, PUT, DELETE, or WEBSOCKET
    endpoint: Callable[..., Any]
    operation: Operation | None = None  # its OpenAPI operation; None: not in the document
    body_limit: Limit | None = None  # the largest body it takes, in bytes
    open: bool = False  # served without an API key (its OpenAPI operation says `security: []`)


def json_body(settings: Settings) -> int:
    return (
        64 * 1024 + 16 * settings.max_input_chars
    )  # input and instructions, escaped, and the rest


def upload_body(settings: Settings) -> int:
    return int(settings.max_upload_mb * 2**20) + 1024 * 1024  # the file and the form around it


def clone_body(settings: Settings) -> int:
    # /v1/audio/clone also takes the file as base64 text (ref_audio_base64)
    return upload_body(settings) * 4 // 3 + json_body(settings)


def jobs_body(settings: Settings) -> int:
    return min(jobs.BODY_CAP, settings.max_job_items * json_body(settings))


def lexicon_body(settings: Settings) -> int:
    return lexicon_rules.MAX_BODY_BYTES


def _request(schema: dict[str, Any], media: str = "application/json") -> dict[str, Any]:
    return {"required": True, "content": {media: {"schema": schema}}}


def _schema(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def _errors(*statuses: int) -> dict[str, Any]:
    return {str(s): error(s) for s in statuses}


def _captions_operation(kind: str, media: str) -> Operation:
    return lambda p: {
        "operationId": f"getJobItemCaptions{kind.title()}",
        "summary": "An item's captions, if it asked for them",
        "responses": responses(
            {"description": "the captions", "content": {media: {"schema": {"type": "string"}}}},
            404,
            409,
        ),
    }


_object = {"content": {"application/json": {"schema": {"type": "object"}}}}
_captions = (("srt", "application/x-subrip"), ("vtt", "text/vtt"))

ROUTES: tuple[ApiRoute, ...] = (
    ApiRoute(
        "/",
        "GET",
        console.page,
        open=True,
        operation=lambda p: {"operationId": "console", "responses": {"200": CONSOLE_PAGE}},
    ),
    ApiRoute(
        "/console",
        "GET",
        console.page,
        open=True,
        operation=lambda p: {"operationId": "consolePage", "responses": {"200": CONSOLE_PAGE}},
    ),
    ApiRoute(
        "/console/{asset}",
        "GET",
        console.asset,
        open=True,
        operation=lambda p: {
            "operationId": "consoleAsset",
            "responses": {
                "200": {
                    "description": "the console's script or style sheet",
                    "content": {
                        "text/javascript": {"schema": {"type": "string"}},
                        "text/css": {"schema": {"type": "string"}},
                    },
                },
                "404": error(404),
            },
        },
    ),
    ApiRoute(
        "/health",
        "GET",
        ops.health,
        open=True,
        operation=lambda p: {
            "operationId": "health",
            "responses": {"200": {"description": "status and one entry per sidecar", **_object}},
        },
    ),
    ApiRoute(
        "/ready",
        "GET",
        ops.ready,
        open=True,
        operation=lambda p: {
            "operationId": "ready",
            "responses": {
                "200": {"description": "can take work", **_object},
                "503": {
                    "description": "starting, draining or failed",
                    **_object,
                    "headers": {"Retry-After": {"schema": {"type": "integer"}}},
                },
            },
        },
    ),
    ApiRoute(
        "/metrics",
        "GET",
        ops.prometheus,
        operation=lambda p: {
            "operationId": "metrics",
            "responses": responses(
                {
                    "description": "Prometheus text format",
                    "content": {"text/plain": {"schema": {"type": "string"}}},
                },
                403,
            ),
        },
    ),
    ApiRoute(
        "/openapi.json",
        "GET",
        ops.openapi_json,
        operation=lambda p: {
            "operationId": "openapi",
            "responses": responses({"description": "this document", **_object}),
        },
    ),
    ApiRoute(
        "/v1/models",
        "GET",
        ops.list_models,
        operation=lambda p: {
            "operationId": "listModels",
            "responses": responses(json_ref("ModelList", "the models")),
        },
    ),
    ApiRoute(
        "/v1/models/{model:path}",
        "GET",
        ops.get_model,
        operation=lambda p: {
            "operationId": "retrieveModel",
            "responses": responses(json_ref("Model", "the model"), 404),
        },
    ),
    ApiRoute(
        "/v1/audio/speech",
        "POST",
        speech.speech,
        body_limit=json_body,
        operation=lambda p: {
            "operationId": "createSpeech",
            "summary": "Speech from text (OpenAI-compatible)",
            "requestBody": _request(_schema("CreateSpeechRequest")),
            "responses": responses(p.audio, *SPEECH_ERRORS),
        },
    ),
    ApiRoute(
        "/v1/audio/speech/captioned",
        "POST",
        captioned.captioned,
        body_limit=json_body,
        operation=lambda p: {
            "operationId": "createCaptionedSpeech",
            "summary": "Speech as JSON: the audio (base64) and each sentence's timing",
            "requestBody": _request(_schema("CreateCaptionedSpeechRequest")),
            "responses": responses(
                json_ref("CaptionedSpeech", "the audio and its segments"), *SPEECH_ERRORS
            ),
        },
    ),
    ApiRoute("/v1/audio/speech/stream", WEBSOCKET, speech_stream.stream),
    ApiRoute(
        "/v1/audio/design",
        "POST",
        one_shot.design,
        body_limit=json_body,
        operation=lambda p: {
            "operationId": "designSpeech",
            "summary": "Speech in a voice described by instructions (one shot)",
            "requestBody": {
                "required": True,
                "content": {
                    t: {"schema": form(p.options, ["input", "instructions"])}
                    for t in (
                        "multipart/form-data",
                        "application/x-www-form-urlencoded",
                        "application/json",
                    )
                },
            },
            "responses": responses(p.audio, *SPEECH_ERRORS),
        },
    ),
    ApiRoute(
        "/v1/audio/clone",
        "POST",
        one_shot.clone,
        body_limit=clone_body,
        operation=lambda p: {
            "operationId": "cloneSpeech",
            "summary": "Speech in the voice of an uploaded reference (one shot)",
            "requestBody": _request(
                form({**p.options, **p.reference}, ["input", "file", "transcript"]),
                "multipart/form-data",
            ),
            "responses": responses(p.audio, *SPEECH_ERRORS, 422),
        },
    ),
    ApiRoute(
        "/v1/audio/voices",
        "GET",
        voice_routes.list_voices,
        operation=lambda p: {
            "operationId": "listVoices",
            "summary": "Built-in and saved voices",
            "responses": responses(json_ref("VoiceList", "the voices")),
        },
    ),
    ApiRoute(
        "/v1/audio/voices",
        "POST",
        voice_routes.create_voice,
        body_limit=upload_body,
        operation=lambda p: {
            "operationId": "createVoice",
            "summary": "Save a voice from a reference clip and its transcript",
            "requestBody": _request(
                form(
                    {
                        "name": {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"},
                        "type": {
                            "type": "string",
                            "enum": ["audio_sample", "prompt"],
                            "default": "audio_sample",
                        },
                        "audio_sample": p.upload,
                        **p.reference,
                        "consent": {"type": "string"},
                        "prompt": {
                            "type": "string",
                            "description": "type prompt: voice-design items",
                        },
                        "model": {"type": "string"},
                        "script_hint": {"type": "string"},
                    },
                    ["name"],
                ),
                "multipart/form-data",
            ),
            "responses": {
                "201": json_ref("Voice", "the saved voice"),
                **_errors(400, 401, 403, 409, 413, 415, 422, 429, 503, 507),
            },
        },
    ),
    ApiRoute(
        "/v1/audio/voices/{name}",
        "GET",
        voice_routes.get_voice,
        operation=lambda p: {
            "operationId": "getVoice",
            "responses": responses(json_ref("Voice", "the voice"), 404),
        },
    ),
    ApiRoute(
        "/v1/audio/voices/{name}",
        "DELETE",
        voice_routes.delete_voice,
        operation=lambda p: {
            "operationId": "deleteVoice",
            "responses": responses(json_ref("DeletedVoice", "deleted"), 400, 403, 404),
        },
    ),
    ApiRoute(
        "/v1/audio/lexicons",
        "GET",
        lexicons.list_lexicons,
        operation=lambda p: {
            "operationId": "listLexicons",
            "responses": responses(json_ref("LexiconList", "the lexicons")),
        },
    ),
    ApiRoute(
        "/v1/audio/lexicons/{name}",
        "GET",
        lexicons.get_lexicon,
        operation=lambda p: {
            "operationId": "getLexicon",
            "responses": responses(json_ref("Lexicon", "the lexicon"), 404),
        },
    ),
    ApiRoute(
        "/v1/audio/lexicons/{name}",
        "PUT",
        lexicons.put_lexicon,
        body_limit=lexicon_body,
        operation=lambda p: {
            "operationId": "putLexicon",
            "summary": "Save a pronunciation lexicon, replacing one of that name",
            "requestBody": _request(
                {
                    "type": "object",
                    "required": ["language", "entries"],
                    "additionalProperties": False,
                    "properties": {
                        "language": {"type": "string"},
                        "voice": {
                            "type": ["string", "null"],
                            "minLength": 1,
                            "description": "only the spans read in this voice (default: every span)",
                        },
                        "entries": {
                            "type": "object",
                            "maxProperties": lexicon_rules.MAX_ENTRIES,
                            "additionalProperties": {
                                "type": "string",
                                "minLength": 1,
                                "maxLength": lexicon_rules.MAX_ENTRY_CHARS,
                            },
                        },
                    },
                }
            ),
            "responses": {
                "200": json_ref("Lexicon", "replaced"),
                "201": json_ref("Lexicon", "saved"),
                **_errors(400, 401, 409, 413, 415, 507),
            },
        },
    ),
    ApiRoute(
        "/v1/audio/lexicons/{name}",
        "DELETE",
        lexicons.delete_lexicon,
        operation=lambda p: {
            "operationId": "deleteLexicon",
            "responses": responses(json_ref("DeletedLexicon", "deleted"), 404),
        },
    ),
    ApiRoute(
        "/v1/cache",
        "DELETE",
        ops.purge_cache,
        operation=lambda p: {
            "operationId": "purgeCache",
            "summary": "Remove the API key's result-cache entries; an admin key's: all (docs/API.md)",
            "responses": responses(
                {
                    "description": "what was removed",
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "required": ["object", "enabled", "deleted", "bytes"],
                                "properties": {
                                    "object": {"const": "cache.purge"},
                                    "enabled": {"type": "boolean"},
                                    "deleted": {"type": "integer"},
                                    "bytes": {"type": "integer"},
                                },
                            }
                        }
                    },
                }
            ),
        },
    ),
    ApiRoute(
        "/v1/jobs",
        "POST",
        jobs.create_job,
        body_limit=jobs_body,
        operation=lambda p: {
            "operationId": "createJob",
            "summary": "Store a list of speech requests and run them behind interactive work (docs/JOBS.md)",
            "parameters": [
                {
                    "name": "Idempotency-Key",
                    "in": "header",
                    "required": False,
                    "schema": {"type": "string", "minLength": 1, "maxLength": 255},
                }
            ],
            "requestBody": _request(
                {
                    "type": "object",
                    "required": ["items"],
                    "additionalProperties": False,
                    "properties": {
                        "items": {
                            "type": "array",
                            "minItems": 1,
                            "maxItems": p.settings.max_job_items,
                            "items": _schema("JobItemRequest"),
                        },
                        "not_before": {"type": "string", "format": "date-time"},
                        "deadline": {"type": "string", "format": "date-time"},
                        "callback_url": {"type": "string", "format": "uri"},
                        "callback_secret": {
                            "type": "string",
                            "pattern": callbacks.SECRET_PATTERN,
                            "writeOnly": True,
                            "description": "signs this job's callback in place of the key's secret; never shown back",
                        },
                    },
                }
            ),
            "responses": {
                "202": json_ref("Job", "the job, committed to disk"),
                **_errors(400, 401, 409, 413, 415, 503, 507),
            },
        },
    ),
    ApiRoute(
        "/v1/jobs",
        "GET",
        jobs.list_jobs,
        operation=lambda p: {
            "operationId": "listJobs",
            "summary": "Jobs, newest first, without their items",
            "parameters": [
                {
                    "name": "limit",
                    "in": "query",
                    "schema": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20},
                },
                {"name": "after", "in": "query", "schema": {"type": "string"}},
            ],
            "responses": responses(json_ref("JobList", "a page of jobs"), 400),
        },
    ),
    ApiRoute(
        "/v1/jobs/{job_id}",
        "GET",
        jobs.get_job,
        operation=lambda p: {
            "operationId": "getJob",
            "responses": responses(json_ref("Job", "the job and its items"), 404),
        },
    ),
    ApiRoute(
        "/v1/jobs/{job_id}",
        "DELETE",
        jobs.cancel_job,
        operation=lambda p: {
            "operationId": "cancelJob",
            "summary": "Cancel: items not yet done end cancelled",
            "responses": responses(json_ref("Job", "the job"), 404),
        },
    ),
    ApiRoute(
        "/v1/jobs/{job_id}/items/{n}/audio",
        "GET",
        jobs.item_audio,
        operation=lambda p: {
            "operationId": "getJobItemAudio",
            "summary": "An item's result, once it is done",
            "responses": responses(
                {
                    "description": "the audio file",
                    "content": {
                        t: {"schema": {"type": "string", "format": "binary"}}
                        for t in formats.MEDIA_TYPES.values()
                    },
                },
                404,
                409,
            ),
        },
    ),
    *(
        ApiRoute(
            f"/v1/jobs/{{job_id}}/items/{{n}}/captions.{kind}",
            "GET",
            jobs.item_captions,
            operation=_captions_operation(kind, media),
        )
        for kind, media in _captions
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


def body_limits(settings: Settings) -> list[tuple[re.Pattern[str], str, int]]:
    """(the path's pattern, the method, its largest body in bytes) for each route that takes one."""
    return [
        (compile_path(r.path)[0], r.method, r.body_limit(settings))
        for r in ROUTES
        if r.body_limit is not None
    ]


def open_patterns() -> list[re.Pattern[str]]:
    """The paths served without an API key, whatever the method."""
    return [compile_path(r.path)[0] for r in ROUTES if r.open]
