"""The pieces the OpenAPI document is made of: error responses, JSON references, forms, and the
speech request's fields, built from the same constants the checks use.

Each route's operation (supervisor/http/operations.py, job_operations.py) is written from these;
supervisor/http/openapi.py puts the operations and the shared schemas together.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from sidecar.shared.tiers import SERVICE_TIERS
from supervisor.settings import Settings
from supervisor.speech import cost, delivery, formats, schemas

ERRORS: dict[int, str] = {
    400: "invalid request: the message says what, `param` names the field",
    401: "missing or unknown API key",
    403: "only an admin API key may do this (make or delete a shared voice; read /metrics, "
    "which a key given with --api-key may too)",
    404: "no such voice or model",
    409: "a voice or lexicon by that name exists already (perhaps another API key's)",
    413: "the body, or the uploaded file, is over its size limit",
    415: "a body or an uploaded file of a type this route does not take",
    422: "the reference audio cannot be used (undecodable, silent, too long)",
    429: "the queue is full, or answers made wait unread by their clients; retry after "
    "Retry-After seconds",
    500: "generation failed (the message says why)",
    503: "starting, draining, no device left, or too many connections; retry after "
    "Retry-After seconds",
    504: "not done within the request's request_timeout_s (or the server's --request-timeout-s)",
    507: "the server's storage is full or failing; retry after Retry-After seconds",
}


def error(status: int) -> dict[str, Any]:
    response: dict[str, Any] = {
        "description": ERRORS[status],
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}},
    }
    if status in (429, 503):
        response["headers"] = {
            "Retry-After": {
                "schema": {"type": "integer", "minimum": 1},
                "description": "seconds to wait",
            }
        }
    return response


def responses(ok: dict[str, Any], *statuses: int) -> dict[str, Any]:
    return {"200": ok, **{str(s): error(s) for s in (401, *statuses)}}


def request_body(schema: dict[str, Any], media: str = "application/json") -> dict[str, Any]:
    return {"required": True, "content": {media: {"schema": schema}}}


def schema_ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def error_statuses(*statuses: int) -> dict[str, Any]:
    """The error responses of these statuses, where a route answers other than 200 on success."""
    return {str(s): error(s) for s in statuses}


CONSOLE_PAGE = {
    "description": "the web console (docs/API.md, The console)",
    "content": {"text/html": {"schema": {"type": "string"}}},
}


def binary_content(media_types: Iterable[str]) -> dict[str, Any]:
    """A response's `content`: a file in any of `media_types`."""
    return {t: {"schema": {"type": "string", "format": "binary"}} for t in media_types}


def json_ref(schema_ref: str, description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema_ref}"}}},
    }


def speech_properties(settings: Settings) -> dict[str, Any]:
    text = {
        "type": "string",
        "minLength": 1,
        "maxLength": settings.max_input_chars,
        "pattern": r"\S",
    }
    properties: dict[str, Any] = {
        "model": {
            "type": "string",
            "enum": list(schemas.MODELS),
            "default": "omnivoice",
            "description": "every name is the one OmniVoice model",
        },
        "input": {
            **text,
            "description": "the text to speak; long text is chunked. As read (SSML, "
            f"lexicon, normalisation) at most {cost.EXPANSION * settings.max_input_chars} characters "
            "(input_too_long), and at most --max-request-audio-s of audio with its pauses "
            f"({settings.max_request_audio_s:g} s; audio_too_long)",
        },
        "voice": {
            "anyOf": [
                {"type": "string", "enum": ["auto", *schemas.OPENAI_VOICES]},
                {
                    "type": "string",
                    "minLength": 1,
                    "pattern": r"\S",
                    "description": "a saved voice's name",
                },
                {
                    "type": "object",
                    "properties": {"id": {"type": "string", "minLength": 1}},
                    "required": ["id"],
                    "additionalProperties": False,
                },
            ],
            "default": "auto",
        },
        "instructions": {
            "type": "string",
            "maxLength": settings.max_input_chars,
            "description": "voice design: comma-separated items such as 'female, low pitch, british accent'; "
            "free-form text is read for the items it names (X-OmniVoice-Instructions says which)",
        },
        "response_format": {
            "type": "string",
            "enum": list(formats.FORMATS),
            "default": settings.default_response_format,
        },
        "speed": {"type": "number", "minimum": 0.25, "maximum": 4.0, "default": 1.0},
        "stream_format": {
            "type": "string",
            "enum": list(schemas.STREAM_FORMATS),
            "default": "audio",
        },
        "language": {
            "type": ["string", "null"],
            "description": "a language id ('en') or English name ('German'); none: the model tells",
        },
        "num_step": {"type": "integer", "minimum": 1, "maximum": 128, "default": settings.num_step},
        "guidance_scale": {"type": "number", "minimum": 0, "maximum": 10, "default": 2.0},
        "duration": {
            "type": "number",
            "exclusiveMinimum": 0,
            "maximum": schemas.MAX_DURATION_S,
            "description": "seconds of audio to make, instead of the estimate",
        },
        "chunk_mode": {
            "type": "string",
            "enum": list(schemas.CHUNK_MODES),
            "default": "concurrent",
        },
        "seed": {"type": "integer", "minimum": 0, "maximum": schemas.MAX_SEED},
        "denoise": {"type": "boolean", "default": True},
        "lexicon": {
            "type": "string",
            "description": "a saved lexicon's name (PUT /v1/audio/lexicons/{name})",
        },
        "dialogue": {
            "type": "boolean",
            "description": "the input is one turn per line: '[voice] text'",
        },
        "pause_ms": {
            "type": "integer",
            "minimum": 0,
            "maximum": schemas.MAX_PAUSE_MS,
            "default": 300,
            "description": "silence between dialogue turns",
        },
        "normalize": {
            "type": "boolean",
            "description": "spell out numbers, dates, times, currency, units and abbreviations (default: the server's --normalize)",
        },
        "sample_rate": {
            "type": "integer",
            "minimum": delivery.SAMPLE_RATES[0],
            "maximum": delivery.SAMPLE_RATES[1],
            "description": "the answer's sample rate (default 24000; 8000 for mulaw and alaw)",
        },
        "loudness": {
            "anyOf": [
                {"type": "string", "enum": list(delivery.PRESETS)},
                {
                    "type": "object",
                    "properties": {
                        "lufs": {
                            "type": "number",
                            "minimum": delivery.LUFS_RANGE[0],
                            "maximum": delivery.LUFS_RANGE[1],
                        },
                        "true_peak_db": {
                            "type": "number",
                            "minimum": delivery.TRUE_PEAK_RANGE[0],
                            "maximum": delivery.TRUE_PEAK_RANGE[1],
                            "default": delivery.DEFAULT_TRUE_PEAK_DB,
                        },
                    },
                    "required": ["lufs"],
                    "additionalProperties": False,
                },
            ],
            "description": "normalise the whole output (buffered: the answer starts when it is all made)",
        },
        # Other systems' names (docs/MIGRATING.md): accepted, each the field its description names.
        "stream": {
            "type": "boolean",
            "deprecated": True,
            "description": "omnivoice-triton-server: true = stream_format sse (pcm unless response_format says)",
        },
        "speaker": {
            "type": "string",
            "minLength": 1,
            "deprecated": True,
            "description": "omnivoice-triton-server: voice (wins over it)",
        },
        "instruct": {
            "type": "string",
            "maxLength": settings.max_input_chars,
            "deprecated": True,
            "description": "OmniVoice-Studio: instructions",
        },
        "description": {
            "type": "string",
            "maxLength": settings.max_input_chars,
            "deprecated": True,
            "description": "OmniVoice-Studio: instructions",
        },
        "service_tier": {
            "type": "string",
            "enum": list(SERVICE_TIERS),
            "default": schemas.SPEECH_TIER,
            "description": "auto, default, priority: interactive; flex: bulk, behind interactive "
            "work (a job item's default)",
        },
        "request_timeout_s": {
            "type": "number",
            "minimum": schemas.REQUEST_TIMEOUT_S[0],
            "maximum": schemas.REQUEST_TIMEOUT_S[1],
            "description": "answer 504 if not done by then (default: the server's --request-timeout-s)",
        },
        "preprocess_prompt": {
            "type": "boolean",
            "deprecated": True,
            "description": "OmniVoice-Studio: accepted; a saved voice was preprocessed when saved",
        },
        "chunk_duration": {
            "type": "number",
            "minimum": 1,
            "maximum": schemas.MAX_DURATION_S,
            "description": "this request's chunk length, seconds",
        },
        "chunk_threshold": {
            "type": "number",
            "minimum": 0,
            "maximum": 2 * schemas.MAX_DURATION_S,
            "description": "input estimated at up to this many seconds stays one chunk",
        },
    }
    return {k: v if k == "input" else _nullable(v) for k, v in properties.items()}


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """An optional field: null means "not given" (the default), as some clients send it."""
    out = dict(schema)
    if "anyOf" in out:
        out["anyOf"] = [*out["anyOf"], {"type": "null"}]
        return out
    kind = out.get("type")
    if kind is not None:
        out["type"] = [
            *(kind if isinstance(kind, list) else [kind]),
            *([] if "null" in kind else ["null"]),
        ]
    if "enum" in out:
        out["enum"] = [*out["enum"], None]
    return out


def form(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


SPEECH_ERRORS = (400, 413, 415, 429, 500, 503, 504)  # what a speech route can answer


@dataclass(frozen=True)
class Parts:
    """The pieces several operations share, made once from the settings."""

    settings: Settings
    speech: dict[str, Any]  # CreateSpeechRequest's properties
    options: dict[str, Any]  # the same without a voice: the one-shot clone and design forms
    upload: dict[str, Any]  # an uploaded reference clip
    reference: dict[str, Any]  # the clip, its transcript and whether to trim it
    audio: dict[str, Any]  # a speech answer: audio in the requested format, or SSE

    @classmethod
    def of(cls, settings: Settings) -> Parts:
        speech = speech_properties(settings)
        upload = {
            "type": "string",
            "format": "binary",
            "description": "WAV, FLAC, MP3 or OGG, at most "
            f"{settings.max_upload_mb:g} MiB and {settings.max_reference_s:g} s",
        }
        reference = {
            "file": upload,
            "transcript": {
                "type": "string",
                "minLength": 1,
                "description": "what the reference says",
            },
            "preprocess": {
                "type": "boolean",
                "default": True,
                "description": "trim silences of the reference",
            },
        }
        audio = {
            "description": "audio in the requested format; text/event-stream with stream_format sse",
            "content": {
                **binary_content(formats.MEDIA_TYPES.values()),
                "text/event-stream": {
                    "schema": {
                        "type": "object",
                        "required": ["data"],
                        "properties": {
                            "event": {"type": "string"},
                            "data": {
                                "type": "string",
                                "contentMediaType": "application/json",
                                "contentSchema": {"$ref": "#/components/schemas/SpeechStreamEvent"},
                            },
                        },
                    }
                },
            },
        }
        options = {k: v for k, v in speech.items() if k not in ("voice", "speaker")}
        return cls(settings, speech, options, upload, reference, audio)


Operation = Callable[[Parts], dict[str, Any]]  # a route's OpenAPI operation
