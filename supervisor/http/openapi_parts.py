"""The pieces the OpenAPI document is made of: error responses, JSON references, forms, and the
speech request's fields, generated from the declaration the checks validate against.

Each route's operation (supervisor/http/operations.py, job_operations.py) is written from these;
supervisor/http/openapi.py puts the operations and the shared schemas together.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from supervisor.settings import HttpSettings, SpeechSettings
from supervisor.speech.audio import formats
from supervisor.speech.request import speech_body
from supervisor.speech.synthesis import cost

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


def error(status: int) -> dict[str, object]:
    response: dict[str, object] = {
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


def responses(ok: dict[str, object], *statuses: int) -> dict[str, object]:
    return {"200": ok, **{str(s): error(s) for s in (401, *statuses)}}


def request_body(schema: dict[str, object], media: str = "application/json") -> dict[str, object]:
    return {"required": True, "content": {media: {"schema": schema}}}


def schema_ref(name: str) -> dict[str, object]:
    return {"$ref": f"#/components/schemas/{name}"}


def error_statuses(*statuses: int) -> dict[str, object]:
    """The error responses of these statuses, where a route answers other than 200 on success."""
    return {str(s): error(s) for s in statuses}


CONSOLE_PAGE = {
    "description": "the web console (docs/API.md, The console)",
    "content": {"text/html": {"schema": {"type": "string"}}},
}


def binary_content(media_types: Iterable[str]) -> dict[str, object]:
    """A response's `content`: a file in any of `media_types`."""
    return {t: {"schema": {"type": "string", "format": "binary"}} for t in media_types}


def json_ref(schema_ref: str, description: str) -> dict[str, object]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema_ref}"}}},
    }


def speech_properties(settings: SpeechSettings) -> dict[str, dict[str, object]]:
    """CreateSpeechRequest's properties, from the request's declaration
    (supervisor/speech/request/speech_body.py), and what its input is checked against once read."""
    properties = speech_body.properties(speech_body.Limits.of(settings))
    text = properties["input"]
    text["description"] = f"{text['description']}" + (
        f". As read (SSML, lexicon, normalisation) at most "
        f"{cost.EXPANSION * settings.max_input_chars} characters (input_too_long), and at most "
        "--max-request-audio-s of audio with its pauses "
        f"({settings.max_request_audio_s:g} s; audio_too_long)"
    )
    return properties


def form(properties: Mapping[str, object], required: list[str]) -> dict[str, object]:
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

    http: HttpSettings  # the edge's limits: uploads, a job's items
    speech: dict[str, dict[str, object]]  # CreateSpeechRequest's properties
    options: dict[
        str, dict[str, object]
    ]  # the same without a voice: the one-shot clone and design forms
    upload: dict[str, object]  # an uploaded reference clip
    reference: dict[str, dict[str, object]]  # the clip, its transcript and whether to trim it
    audio: dict[str, object]  # a speech answer: audio in the requested format, or SSE

    @classmethod
    def of(cls, http: HttpSettings, speech: SpeechSettings) -> Parts:
        properties = speech_properties(speech)
        upload: dict[str, object] = {
            "type": "string",
            "format": "binary",
            "description": "WAV, FLAC, MP3 or OGG, at most "
            f"{http.max_upload_mb:g} MiB and {http.max_reference_s:g} s",
        }
        reference: dict[str, dict[str, object]] = {
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
        audio: dict[str, object] = {
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
        options = {k: v for k, v in properties.items() if k not in ("voice", "speaker")}
        return cls(http, properties, options, upload, reference, audio)


Operation = Callable[[Parts], dict[str, object]]  # a route's OpenAPI operation
