"""Each route's OpenAPI operation: what it takes, what it answers, and every error status.

supervisor/http/route_table.py names one of these beside each HTTP route, and
supervisor/http/openapi.py calls it with the document's shared pieces (`Parts`, from
supervisor/http/openapi_parts.py) to write the route's entry under `paths`. The job routes'
operations are in supervisor/http/job_operations.py.
"""

from __future__ import annotations

from supervisor.http.openapi_parts import (
    CONSOLE_PAGE,
    SPEECH_ERRORS,
    Parts,
    error,
    error_statuses,
    form,
    json_ref,
    request_body,
    responses,
    schema_ref,
)
from supervisor.speech.stores import lexicons as lexicon_rules

_object = {"content": {"application/json": {"schema": {"type": "object"}}}}


def console(parts: Parts) -> dict[str, object]:
    return {"operationId": "console", "responses": {"200": CONSOLE_PAGE}}


def console_page(parts: Parts) -> dict[str, object]:
    return {"operationId": "consolePage", "responses": {"200": CONSOLE_PAGE}}


def console_asset(parts: Parts) -> dict[str, object]:
    return {
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
    }


def health(parts: Parts) -> dict[str, object]:
    return {
        "operationId": "health",
        "responses": {"200": {"description": "status and one entry per sidecar", **_object}},
    }


def ready(parts: Parts) -> dict[str, object]:
    return {
        "operationId": "ready",
        "responses": {
            "200": {"description": "can take work", **_object},
            "503": {
                "description": "starting, draining or failed",
                **_object,
                "headers": {"Retry-After": {"schema": {"type": "integer"}}},
            },
        },
    }


def metrics(parts: Parts) -> dict[str, object]:
    return {
        "operationId": "metrics",
        "responses": responses(
            {
                "description": "Prometheus text format",
                "content": {"text/plain": {"schema": {"type": "string"}}},
            },
            403,
        ),
    }


def openapi(parts: Parts) -> dict[str, object]:
    return {
        "operationId": "openapi",
        "responses": responses({"description": "this document", **_object}),
    }


def list_models(parts: Parts) -> dict[str, object]:
    return {
        "operationId": "listModels",
        "responses": responses(json_ref("ModelList", "the models")),
    }


def retrieve_model(parts: Parts) -> dict[str, object]:
    return {
        "operationId": "retrieveModel",
        "responses": responses(json_ref("Model", "the model"), 404),
    }


def create_speech(p: Parts) -> dict[str, object]:
    return {
        "operationId": "createSpeech",
        "summary": "Speech from text (OpenAI-compatible)",
        "requestBody": request_body(schema_ref("CreateSpeechRequest")),
        "responses": responses(p.audio, *SPEECH_ERRORS),
    }


def create_captioned_speech(parts: Parts) -> dict[str, object]:
    return {
        "operationId": "createCaptionedSpeech",
        "summary": "Speech as JSON: the audio (base64) and each sentence's timing",
        "requestBody": request_body(schema_ref("CreateCaptionedSpeechRequest")),
        "responses": responses(
            json_ref("CaptionedSpeech", "the audio and its segments"), *SPEECH_ERRORS
        ),
    }


def design_speech(p: Parts) -> dict[str, object]:
    return {
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
    }


def clone_speech(p: Parts) -> dict[str, object]:
    return {
        "operationId": "cloneSpeech",
        "summary": "Speech in the voice of an uploaded reference (one shot)",
        "requestBody": request_body(
            form({**p.options, **p.reference}, ["input", "file", "transcript"]),
            "multipart/form-data",
        ),
        "responses": responses(p.audio, *SPEECH_ERRORS, 422),
    }


def list_voices(parts: Parts) -> dict[str, object]:
    return {
        "operationId": "listVoices",
        "summary": "Built-in and saved voices",
        "responses": responses(json_ref("VoiceList", "the voices")),
    }


def create_voice(p: Parts) -> dict[str, object]:
    return {
        "operationId": "createVoice",
        "summary": "Save a voice from a reference clip and its transcript",
        "requestBody": request_body(
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
            **error_statuses(400, 401, 403, 409, 413, 415, 422, 429, 503, 507),
        },
    }


def get_voice(parts: Parts) -> dict[str, object]:
    return {
        "operationId": "getVoice",
        "responses": responses(json_ref("Voice", "the voice"), 404),
    }


def delete_voice(parts: Parts) -> dict[str, object]:
    return {
        "operationId": "deleteVoice",
        "responses": responses(json_ref("DeletedVoice", "deleted"), 400, 403, 404),
    }


def list_lexicons(parts: Parts) -> dict[str, object]:
    return {
        "operationId": "listLexicons",
        "responses": responses(json_ref("LexiconList", "the lexicons")),
    }


def get_lexicon(parts: Parts) -> dict[str, object]:
    return {
        "operationId": "getLexicon",
        "responses": responses(json_ref("Lexicon", "the lexicon"), 404),
    }


def put_lexicon(parts: Parts) -> dict[str, object]:
    return {
        "operationId": "putLexicon",
        "summary": "Save a pronunciation lexicon, replacing one of that name",
        "requestBody": request_body(
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
            **error_statuses(400, 401, 409, 413, 415, 507),
        },
    }


def delete_lexicon(parts: Parts) -> dict[str, object]:
    return {
        "operationId": "deleteLexicon",
        "responses": responses(json_ref("DeletedLexicon", "deleted"), 404),
    }


def purge_cache(parts: Parts) -> dict[str, object]:
    return {
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
    }
