"""The OpenAPI 3.1 document served at `/openapi.json`: the route table's operations and the
schemas they share.

Starlette does not derive one from the routes, so each route of supervisor/http/route_table.py
names its operation (supervisor/http/operations.py, job_operations.py), written from the pieces
in supervisor/http/openapi_parts.py. The
speech request is OpenAI's `CreateSpeechRequest` with our extensions; errors are OpenAI's
`ErrorResponse`; every status a route can answer is listed, with Retry-After where it comes.
"""

from __future__ import annotations

import re

from supervisor import __version__
from supervisor.http.openapi_parts import Parts
from supervisor.http.route_table import ROUTES
from supervisor.jobs import item_fields
from supervisor.settings import Settings

VERSION = __version__  # the installed package's

# A path parameter's schema where it is more than a string
PATH_PARAMETERS: dict[str, dict[str, object]] = {
    "n": {"type": "integer", "minimum": 0},
    "asset": {"type": "string", "enum": ["console.js", "console.css"]},
}
_PARAMETER = re.compile(r"{(\w+)(?::\w+)?}")


def paths(parts: Parts) -> dict[str, dict[str, object]]:
    """Each documented route's operation under its path, with the path's parameters."""
    out: dict[str, dict[str, object]] = {}
    for route in ROUTES:
        if route.operation is None:
            continue
        path = _PARAMETER.sub(r"{\1}", route.path)
        if path not in out:
            names = _PARAMETER.findall(route.path)
            out[path] = (
                {
                    "parameters": [
                        {
                            "name": n,
                            "in": "path",
                            "required": True,
                            "schema": PATH_PARAMETERS.get(n, {"type": "string"}),
                        }
                        for n in names
                    ]
                }
                if names
                else {}
            )
        operation = route.operation(parts)
        if route.open:
            operation = {**operation, "security": []}
        out[path][route.method.lower()] = operation
    return out


def document(settings: Settings) -> dict[str, object]:
    parts = Parts.of(settings.http, settings.speech)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "omnivoice-supervisor",
            "version": VERSION,
            "description": "OpenAI-compatible OmniVoice text to speech. docs/API.md describes every field.",
        },
        "servers": [{"url": "/"}],
        "security": [{"bearer": []}],
        "paths": paths(parts),
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": _components(parts.speech),
        },
    }


def _components(speech: dict[str, dict[str, object]]) -> dict[str, object]:
    nullable_string = {"type": ["string", "null"]}
    return {
        "CreateSpeechRequest": {
            "type": "object",
            "properties": speech,
            "required": ["input"],
            "additionalProperties": False,
        },
        "CreateCaptionedSpeechRequest": {
            "type": "object",
            "required": ["input"],
            "additionalProperties": False,
            "properties": {
                **speech,
                "timestamp_granularities": {
                    "type": "array",
                    "minItems": 1,
                    "items": {"enum": ["segment", "word"]},
                    "default": ["segment"],
                    "description": "segment: each sentence's timing; word: also each segment's words, timed by the ASR sidecar (--asr-model; without it a 400)",
                },
            },
        },
        "ErrorResponse": {
            "type": "object",
            "required": ["error"],
            "properties": {
                "error": {
                    "type": "object",
                    "required": ["message", "type", "param", "code"],
                    "properties": {
                        "message": {"type": "string"},
                        "type": {"type": "string"},
                        "param": nullable_string,
                        "code": nullable_string,
                    },
                }
            },
        },
        "SpeechStreamEvent": {
            "anyOf": [
                {
                    "type": "object",
                    "required": ["type", "audio"],
                    "properties": {
                        "type": {"const": "speech.audio.delta"},
                        "audio": {"type": "string"},
                    },
                },
                {
                    "type": "object",
                    "required": ["type", "usage"],
                    "properties": {
                        "type": {"const": "speech.audio.done"},
                        "usage": {
                            "type": "object",
                            "required": ["input_tokens", "output_tokens", "total_tokens"],
                            "properties": {
                                k: {"type": "integer"}
                                for k in ("input_tokens", "output_tokens", "total_tokens")
                            },
                        },
                    },
                },
                {
                    "type": "object",
                    "required": ["type", "error"],
                    "properties": {"type": {"const": "error"}, "error": {"type": "object"}},
                },
            ]
        },
        "Voice": {
            "type": "object",
            "required": ["id", "object", "name", "type"],
            "properties": {
                "id": {"type": "string"},
                "object": {"const": "audio.voice"},
                "name": {"type": "string"},
                "type": {"enum": ["audio_sample", "prompt"]},
                "created_at": {"type": "integer"},
                "transcript": {"type": "string"},
                "duration_s": {"type": "number"},
                "prompt": nullable_string,
                "builtin": {"type": "boolean"},
                "deletable": {"type": "boolean"},
            },
        },
        "VoiceList": {
            "type": "object",
            "required": ["object", "data"],
            "properties": {
                "object": {"const": "list"},
                "data": {"type": "array", "items": {"$ref": "#/components/schemas/Voice"}},
            },
        },
        "CaptionedSpeech": {
            "type": "object",
            "required": ["audio", "format", "sample_rate", "segments"],
            "properties": {
                "audio": {"type": "string", "contentEncoding": "base64"},
                "format": {"type": "string"},
                "sample_rate": {"type": "integer"},
                "segments": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["text", "start", "end"],
                        "properties": {
                            "text": {"type": "string"},
                            "start": {"type": "number"},
                            "end": {"type": "number"},
                        },
                    },
                },
            },
        },
        "Lexicon": {
            "type": "object",
            "required": ["name", "object", "language", "entries"],
            "properties": {
                "name": {"type": "string"},
                "object": {"const": "audio.lexicon"},
                "language": {"type": "string"},
                "voice": {"type": ["string", "null"]},
                "entries": {"type": "object", "additionalProperties": {"type": "string"}},
                "updated_at": {"type": "integer"},
            },
        },
        "LexiconList": {
            "type": "object",
            "required": ["object", "data"],
            "properties": {
                "object": {"const": "list"},
                "data": {"type": "array", "items": {"$ref": "#/components/schemas/Lexicon"}},
            },
        },
        "DeletedLexicon": {
            "type": "object",
            "required": ["name", "object", "deleted"],
            "properties": {
                "name": {"type": "string"},
                "object": {"const": "audio.lexicon.deleted"},
                "deleted": {"type": "boolean"},
            },
        },
        "DeletedVoice": {
            "type": "object",
            "required": ["id", "object", "deleted"],
            "properties": {
                "id": {"type": "string"},
                "object": {"const": "audio.voice.deleted"},
                "deleted": {"type": "boolean"},
            },
        },
        "JobItemRequest": {
            "type": "object",
            "required": ["input"],
            "additionalProperties": False,
            "properties": {
                **speech,
                **item_fields.properties(),
            },
        },
        "Job": {
            "type": "object",
            "required": ["id", "object", "owner", "state", "created_at", "progress"],
            "properties": {
                "id": {"type": "string"},
                "object": {"const": "job"},
                "owner": {
                    "type": "string",
                    "description": "the owner id of the key that made it (its name=, else a hash); default on a keyless server",
                },
                "state": {"enum": ["queued", "running", "completed", "failed", "cancelled"]},
                "created_at": {"type": "number"},
                "finished_at": {"type": ["number", "null"]},
                "cancelled_at": {"type": ["number", "null"]},
                "progress": {"type": "object", "additionalProperties": {"type": "integer"}},
                "items": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["index", "state"],
                        "properties": {
                            "index": {"type": "integer"},
                            "id": nullable_string,
                            "state": {"enum": ["queued", "running", "done", "failed", "cancelled"]},
                            "attempts": {"type": "integer"},
                            "audio_url": nullable_string,
                            "trace_id": {
                                "type": "string",
                                "description": "the item's trace (32 hex digits), every attempt's",
                            },
                            "title": nullable_string,
                        },
                    },
                },
                "not_before": nullable_string,
                "deadline": nullable_string,
                "estimated_finish": nullable_string,
                "deadline_at_risk": {"type": "boolean"},
                "callback_url": nullable_string,
                "callback": {
                    "type": ["object", "null"],
                    "properties": {
                        "state": {"enum": ["pending", "delivered", "failed"]},
                        "attempts": {"type": "integer"},
                        "last_status": {"type": ["integer", "null"]},
                        "last_error": nullable_string,
                    },
                },
                "warm_up": {"type": ["object", "null"]},
                "waiting_for_space": {
                    "type": ["object", "null"],
                    "properties": {
                        "since": {"type": "number"},
                        "needed_bytes": {"type": "integer"},
                        "error": {"type": "string"},
                    },
                },
            },
        },
        "JobList": {
            "type": "object",
            "required": ["object", "data", "has_more"],
            "properties": {
                "object": {"const": "list"},
                "data": {"type": "array", "items": {"$ref": "#/components/schemas/Job"}},
                "first_id": nullable_string,
                "last_id": nullable_string,
                "has_more": {"type": "boolean"},
            },
        },
        "Model": {
            "type": "object",
            "required": ["id", "object", "created", "owned_by"],
            "properties": {
                "id": {"type": "string"},
                "object": {"const": "model"},
                "created": {"type": "integer"},
                "owned_by": {"type": "string"},
            },
        },
        "ModelList": {
            "type": "object",
            "required": ["object", "data"],
            "properties": {
                "object": {"const": "list"},
                "data": {"type": "array", "items": {"$ref": "#/components/schemas/Model"}},
            },
        },
    }
