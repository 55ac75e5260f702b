"""The OpenAPI 3.1 document served at `/openapi.json`, built from the same constants the checks use.

Starlette does not derive one from the routes, so it is written here. The speech request is
OpenAI's `CreateSpeechRequest` with our extensions; errors are OpenAI's `ErrorResponse`; every
status a route can answer is listed, with Retry-After where it comes.
"""

from __future__ import annotations

from typing import Any

from supervisor.jobs import callbacks
from supervisor.settings import Settings
from supervisor.speech import cost, delivery, formats, lexicons, schemas

VERSION = "0.1.0"

ERRORS: dict[int, str] = {
    400: "invalid request: the message says what, `param` names the field",
    401: "missing or unknown API key",
    403: "only an admin API key may do this (make or delete a shared voice)",
    404: "no such voice or model",
    409: "a voice or lexicon by that name exists already (perhaps another API key's)",
    413: "the body, or the uploaded file, is over its size limit",
    415: "a body or an uploaded file of a type this route does not take",
    422: "the reference audio cannot be used (undecodable, silent, too long)",
    429: "the queue is full; retry after Retry-After seconds",
    500: "generation failed (the message says why)",
    503: "starting, draining, or no device left; retry after Retry-After seconds",
    504: "not done within the request's request_timeout_s (or the server's --request-timeout-s)",
    507: "the server's storage is full or failing; retry after Retry-After seconds",
}


def _error(status: int) -> dict[str, Any]:
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


def _responses(ok: dict[str, Any], *statuses: int) -> dict[str, Any]:
    return {"200": ok, **{str(s): _error(s) for s in (401, *statuses)}}


_console_page = {"description": "the web console (docs/API.md, The console)",
                 "content": {"text/html": {"schema": {"type": "string"}}}}  # fmt: skip


def _json(schema_ref: str, description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema_ref}"}}},
    }


def _speech_properties(settings: Settings) -> dict[str, Any]:
    text = {
        "type": "string",
        "minLength": 1,
        "maxLength": settings.max_input_chars,
        "pattern": r"\S",
    }
    properties: dict[str, Any] = {
        "model": {"type": "string", "enum": list(schemas.MODELS), "default": "omnivoice",
                  "description": "every name is the one OmniVoice model"},
        "input": {**text, "description": "the text to speak; long text is chunked. As read (SSML, "
                  f"lexicon, normalisation) at most {cost.EXPANSION * settings.max_input_chars} characters "
                  "(input_too_long), and at most --max-request-audio-s of audio with its pauses "
                  f"({settings.max_request_audio_s:g} s; audio_too_long)"},
        "voice": {"anyOf": [
            {"type": "string", "enum": ["auto", *schemas.OPENAI_VOICES]},
            {"type": "string", "minLength": 1, "pattern": r"\S", "description": "a saved voice's name"},
            {"type": "object", "properties": {"id": {"type": "string", "minLength": 1}}, "required": ["id"], "additionalProperties": False},
        ], "default": "auto"},
        "instructions": {"type": "string", "maxLength": settings.max_input_chars,
                         "description": "voice design: comma-separated items such as 'female, low pitch, british accent'; "
                                        "free-form text is read for the items it names (X-OmniVoice-Instructions says which)"},
        "response_format": {"type": "string", "enum": list(formats.FORMATS), "default": settings.default_response_format},
        "speed": {"type": "number", "minimum": 0.25, "maximum": 4.0, "default": 1.0},
        "stream_format": {"type": "string", "enum": list(schemas.STREAM_FORMATS), "default": "audio"},
        "language": {"type": ["string", "null"], "description": "a language id ('en') or English name ('German'); none: the model tells"},
        "num_step": {"type": "integer", "minimum": 1, "maximum": 128, "default": settings.num_step},
        "guidance_scale": {"type": "number", "minimum": 0, "maximum": 10, "default": 2.0},
        "duration": {"type": "number", "exclusiveMinimum": 0, "maximum": schemas.MAX_DURATION_S,
                     "description": "seconds of audio to make, instead of the estimate"},
        "chunk_mode": {"type": "string", "enum": list(schemas.CHUNK_MODES), "default": "concurrent"},
        "seed": {"type": "integer", "minimum": 0, "maximum": schemas.MAX_SEED},
        "denoise": {"type": "boolean", "default": True},
        "lexicon": {"type": "string", "description": "a saved lexicon's name (PUT /v1/audio/lexicons/{name})"},
        "dialogue": {"type": "boolean", "description": "the input is one turn per line: '[voice] text'"},
        "pause_ms": {"type": "integer", "minimum": 0, "maximum": schemas.MAX_PAUSE_MS, "default": 300,
                     "description": "silence between dialogue turns"},
        "normalize": {"type": "boolean", "description": "spell out numbers, dates, times, currency, units and abbreviations (default: the server's --normalize)"},
        "sample_rate": {"type": "integer", "minimum": delivery.SAMPLE_RATES[0], "maximum": delivery.SAMPLE_RATES[1],
                        "description": "the answer's sample rate (default 24000; 8000 for mulaw and alaw)"},
        "loudness": {"anyOf": [
            {"type": "string", "enum": list(delivery.PRESETS)},
            {"type": "object", "properties": {
                "lufs": {"type": "number", "minimum": delivery.LUFS_RANGE[0], "maximum": delivery.LUFS_RANGE[1]},
                "true_peak_db": {"type": "number", "minimum": delivery.TRUE_PEAK_RANGE[0], "maximum": delivery.TRUE_PEAK_RANGE[1],
                                 "default": delivery.DEFAULT_TRUE_PEAK_DB}},
             "required": ["lufs"], "additionalProperties": False},
        ], "description": "normalise the whole output (buffered: the answer starts when it is all made)"},
        # Other systems' names (docs/MIGRATING.md): accepted, each the field its description names.
        "stream": {"type": "boolean", "deprecated": True, "description": "omnivoice-triton-server: true = stream_format sse (pcm unless response_format says)"},
        "speaker": {"type": "string", "minLength": 1, "deprecated": True, "description": "omnivoice-triton-server: voice (wins over it)"},
        "instruct": {"type": "string", "maxLength": settings.max_input_chars, "deprecated": True, "description": "OmniVoice-Studio: instructions"},
        "description": {"type": "string", "maxLength": settings.max_input_chars, "deprecated": True, "description": "OmniVoice-Studio: instructions"},
        "request_timeout_s": {"type": "number", "minimum": schemas.REQUEST_TIMEOUT_S[0], "maximum": schemas.REQUEST_TIMEOUT_S[1],
                              "description": "answer 504 if not done by then (default: the server's --request-timeout-s)"},
        "preprocess_prompt": {"type": "boolean", "deprecated": True, "description": "OmniVoice-Studio: accepted; a saved voice was preprocessed when saved"},
        "chunk_duration": {"type": "number", "minimum": 1, "maximum": schemas.MAX_DURATION_S, "description": "this request's chunk length, seconds"},
        "chunk_threshold": {"type": "number", "minimum": 0, "maximum": 2 * schemas.MAX_DURATION_S,
                            "description": "input estimated at up to this many seconds stays one chunk"},
    }  # fmt: skip
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


def _form(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def document(settings: Settings) -> dict[str, Any]:
    speech = _speech_properties(settings)
    options = {k: v for k, v in speech.items() if k not in ("voice", "speaker")}
    upload = {"type": "string", "format": "binary", "description": "WAV, FLAC, MP3 or OGG, at most "
              f"{settings.max_upload_mb:g} MiB and {settings.max_reference_s:g} s"}  # fmt: skip
    reference = {"file": upload, "transcript": {"type": "string", "minLength": 1, "description": "what the reference says"},
                 "preprocess": {"type": "boolean", "default": True, "description": "trim silences of the reference"}}  # fmt: skip
    audio = {"description": "audio in the requested format; text/event-stream with stream_format sse",
             "content": {**{t: {"schema": {"type": "string", "format": "binary"}} for t in formats.MEDIA_TYPES.values()},
                         "text/event-stream": {"schema": {"type": "object", "required": ["data"], "properties": {
                             "event": {"type": "string"},
                             "data": {"type": "string", "contentMediaType": "application/json",
                                      "contentSchema": {"$ref": "#/components/schemas/SpeechStreamEvent"}}}}}}}  # fmt: skip
    speech_errors = (400, 413, 415, 429, 500, 503, 504)
    paths: dict[str, Any] = {
        "/v1/audio/speech": {"post": {
            "operationId": "createSpeech", "summary": "Speech from text (OpenAI-compatible)",
            "requestBody": {"required": True, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/CreateSpeechRequest"}}}},
            "responses": _responses(audio, *speech_errors),
        }},
        "/v1/audio/speech/captioned": {"post": {
            "operationId": "createCaptionedSpeech", "summary": "Speech as JSON: the audio (base64) and each sentence's timing",
            "requestBody": {"required": True, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/CreateCaptionedSpeechRequest"}}}},
            "responses": _responses(_json("CaptionedSpeech", "the audio and its segments"), *speech_errors),
        }},
        "/v1/audio/clone": {"post": {
            "operationId": "cloneSpeech", "summary": "Speech in the voice of an uploaded reference (one shot)",
            "requestBody": {"required": True, "content": {"multipart/form-data": {"schema": _form({**options, **reference}, ["input", "file", "transcript"])}}},
            "responses": _responses(audio, *speech_errors, 422),
        }},
        "/v1/audio/design": {"post": {
            "operationId": "designSpeech", "summary": "Speech in a voice described by instructions (one shot)",
            "requestBody": {"required": True, "content": {
                t: {"schema": _form(options, ["input", "instructions"])}
                for t in ("multipart/form-data", "application/x-www-form-urlencoded", "application/json")}},
            "responses": _responses(audio, *speech_errors),
        }},
        "/v1/audio/voices": {
            "get": {"operationId": "listVoices", "summary": "Built-in and saved voices",
                    "responses": _responses(_json("VoiceList", "the voices"))},
            "post": {"operationId": "createVoice", "summary": "Save a voice from a reference clip and its transcript",
                     "requestBody": {"required": True, "content": {"multipart/form-data": {"schema": _form(
                         {"name": {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"},
                          "type": {"type": "string", "enum": ["audio_sample", "prompt"], "default": "audio_sample"},
                          "audio_sample": upload, **reference, "consent": {"type": "string"},
                          "prompt": {"type": "string", "description": "type prompt: voice-design items"},
                          "model": {"type": "string"}, "script_hint": {"type": "string"}},
                         ["name"])}}},
                     "responses": {"201": _json("Voice", "the saved voice"),
                                   **{str(s): _error(s) for s in (400, 401, 403, 409, 413, 415, 422, 429, 503, 507)}}},
        },
        "/v1/audio/voices/{name}": {
            "parameters": [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}],
            "get": {"operationId": "getVoice", "responses": _responses(_json("Voice", "the voice"), 404)},
            "delete": {"operationId": "deleteVoice", "responses": _responses(_json("DeletedVoice", "deleted"), 400, 403, 404)},
        },
        "/v1/audio/lexicons": {"get": {"operationId": "listLexicons", "responses": _responses(_json("LexiconList", "the lexicons"))}},
        "/v1/audio/lexicons/{name}": {
            "parameters": [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}],
            "get": {"operationId": "getLexicon", "responses": _responses(_json("Lexicon", "the lexicon"), 404)},
            "put": {"operationId": "putLexicon", "summary": "Save a pronunciation lexicon, replacing one of that name",
                    "requestBody": {"required": True, "content": {"application/json": {"schema": {
                        "type": "object", "required": ["language", "entries"], "additionalProperties": False, "properties": {
                            "language": {"type": "string"},
                            "voice": {"type": ["string", "null"], "minLength": 1,
                                      "description": "only the spans read in this voice (default: every span)"},
                            "entries": {"type": "object", "maxProperties": lexicons.MAX_ENTRIES,
                                        "additionalProperties": {"type": "string", "minLength": 1,
                                                                 "maxLength": lexicons.MAX_ENTRY_CHARS}}}}}}},
                    "responses": {"200": _json("Lexicon", "replaced"), "201": _json("Lexicon", "saved"),
                                  **{str(s): _error(s) for s in (400, 401, 409, 413, 415, 507)}}},
            "delete": {"operationId": "deleteLexicon", "responses": _responses(_json("DeletedLexicon", "deleted"), 404)},
        },
        "/v1/jobs": {
            "post": {"operationId": "createJob", "summary": "Store a list of speech requests and run them behind interactive work (docs/JOBS.md)",
                     "parameters": [{"name": "Idempotency-Key", "in": "header", "required": False,
                                     "schema": {"type": "string", "minLength": 1, "maxLength": 255}}],
                     "requestBody": {"required": True, "content": {"application/json": {"schema": {
                         "type": "object", "required": ["items"], "additionalProperties": False, "properties": {"items": {
                             "type": "array", "minItems": 1, "maxItems": settings.max_job_items,
                             "items": {"$ref": "#/components/schemas/JobItemRequest"}},
                             "not_before": {"type": "string", "format": "date-time"},
                             "deadline": {"type": "string", "format": "date-time"},
                             "callback_url": {"type": "string", "format": "uri"},
                             "callback_secret": {"type": "string", "pattern": callbacks.SECRET_PATTERN, "writeOnly": True,
                                                 "description": "signs this job's callback in place of the key's secret; never shown back"}}}}}},
                     "responses": {"202": _json("Job", "the job, committed to disk"),
                                   **{str(s): _error(s) for s in (400, 401, 409, 413, 415, 503, 507)}}},
            "get": {"operationId": "listJobs", "summary": "Jobs, newest first, without their items",
                    "parameters": [{"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20}},
                                   {"name": "after", "in": "query", "schema": {"type": "string"}}],
                    "responses": _responses(_json("JobList", "a page of jobs"), 400)},
        },
        "/v1/jobs/{job_id}": {
            "parameters": [{"name": "job_id", "in": "path", "required": True, "schema": {"type": "string"}}],
            "get": {"operationId": "getJob", "responses": _responses(_json("Job", "the job and its items"), 404)},
            "delete": {"operationId": "cancelJob", "summary": "Cancel: items not yet done end cancelled",
                       "responses": _responses(_json("Job", "the job"), 404)},
        },
        "/v1/jobs/{job_id}/items/{n}/audio": {
            "parameters": [{"name": "job_id", "in": "path", "required": True, "schema": {"type": "string"}},
                           {"name": "n", "in": "path", "required": True, "schema": {"type": "integer", "minimum": 0}}],
            "get": {"operationId": "getJobItemAudio", "summary": "An item's result, once it is done",
                    "responses": _responses({"description": "the audio file", "content": {
                        t: {"schema": {"type": "string", "format": "binary"}} for t in formats.MEDIA_TYPES.values()}}, 404, 409)},
        },
        **{f"/v1/jobs/{{job_id}}/items/{{n}}/captions.{kind}": {
            "parameters": [{"name": "job_id", "in": "path", "required": True, "schema": {"type": "string"}},
                           {"name": "n", "in": "path", "required": True, "schema": {"type": "integer", "minimum": 0}}],
            "get": {"operationId": f"getJobItemCaptions{kind.title()}", "summary": "An item's captions, if it asked for them",
                    "responses": _responses({"description": "the captions", "content": {
                        media: {"schema": {"type": "string"}}}}, 404, 409)},
        } for kind, media in (("srt", "application/x-subrip"), ("vtt", "text/vtt"))},
        "/v1/cache": {"delete": {"operationId": "purgeCache", "summary": "Remove the API key's result-cache entries; an admin key's: all (docs/API.md)",
                                 "responses": _responses({"description": "what was removed", "content": {"application/json": {"schema": {
                                     "type": "object", "required": ["object", "enabled", "deleted", "bytes"], "properties": {
                                         "object": {"const": "cache.purge"}, "enabled": {"type": "boolean"},
                                         "deleted": {"type": "integer"}, "bytes": {"type": "integer"}}}}}})}},
        "/v1/models": {"get": {"operationId": "listModels", "responses": _responses(_json("ModelList", "the models"))}},
        "/v1/models/{model}": {
            "parameters": [{"name": "model", "in": "path", "required": True, "schema": {"type": "string"}}],
            "get": {"operationId": "retrieveModel", "responses": _responses(_json("Model", "the model"), 404)},
        },
        "/health": {"get": {"operationId": "health", "security": [], "responses": {"200": {
            "description": "status and one entry per sidecar", "content": {"application/json": {"schema": {"type": "object"}}}}}}},
        "/ready": {"get": {"operationId": "ready", "security": [], "responses": {
            "200": {"description": "can take work", "content": {"application/json": {"schema": {"type": "object"}}}},
            "503": {"description": "starting, draining or failed", "content": {"application/json": {"schema": {"type": "object"}}},
                    "headers": {"Retry-After": {"schema": {"type": "integer"}}}}}}},
        "/metrics": {"get": {"operationId": "metrics", "responses": _responses(
            {"description": "Prometheus text format", "content": {"text/plain": {"schema": {"type": "string"}}}})}},
        "/openapi.json": {"get": {"operationId": "openapi", "responses": _responses(
            {"description": "this document", "content": {"application/json": {"schema": {"type": "object"}}}})}},
        # the web console: its page and assets hold no data, so they need no key
        "/": {"get": {"operationId": "console", "security": [],
                      "responses": {"200": _console_page}}},
        "/console": {"get": {"operationId": "consolePage", "security": [],
                             "responses": {"200": _console_page}}},
        "/console/{asset}": {
            "parameters": [{"name": "asset", "in": "path", "required": True,
                            "schema": {"type": "string", "enum": ["console.js", "console.css"]}}],
            "get": {"operationId": "consoleAsset", "security": [], "responses": {"200": {
                "description": "the console's script or style sheet",
                "content": {"text/javascript": {"schema": {"type": "string"}},
                            "text/css": {"schema": {"type": "string"}}}},
                "404": _error(404)}}},
    }  # fmt: skip
    return {
        "openapi": "3.1.0",
        "info": {"title": "omnivoice-supervisor", "version": VERSION,
                 "description": "OpenAI-compatible OmniVoice text to speech. docs/API.md describes every field."},
        "servers": [{"url": "/"}],
        "security": [{"bearer": []}],
        "paths": paths,
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": _components(speech),
        },
    }  # fmt: skip


def _components(speech: dict[str, Any]) -> dict[str, Any]:
    nullable_string = {"type": ["string", "null"]}
    return {
        "CreateSpeechRequest": {"type": "object", "properties": speech, "required": ["input"], "additionalProperties": False},
        "CreateCaptionedSpeechRequest": {"type": "object", "required": ["input"], "additionalProperties": False, "properties": {
            **speech, "timestamp_granularities": {
                "type": "array", "minItems": 1, "items": {"enum": ["segment", "word"]}, "default": ["segment"],
                "description": "segment: each sentence's timing; word: also each segment's words, timed by the ASR sidecar (--asr-model; without it a 400)"}}},
        "ErrorResponse": {"type": "object", "required": ["error"], "properties": {"error": {
            "type": "object", "required": ["message", "type", "param", "code"],
            "properties": {"message": {"type": "string"}, "type": {"type": "string"}, "param": nullable_string, "code": nullable_string},
        }}},
        "SpeechStreamEvent": {"anyOf": [
            {"type": "object", "required": ["type", "audio"], "properties": {"type": {"const": "speech.audio.delta"}, "audio": {"type": "string"}}},
            {"type": "object", "required": ["type", "usage"], "properties": {"type": {"const": "speech.audio.done"}, "usage": {
                "type": "object", "required": ["input_tokens", "output_tokens", "total_tokens"],
                "properties": {k: {"type": "integer"} for k in ("input_tokens", "output_tokens", "total_tokens")}}}},
            {"type": "object", "required": ["type", "error"], "properties": {"type": {"const": "error"}, "error": {"type": "object"}}},
        ]},
        "Voice": {"type": "object", "required": ["id", "object", "name", "type"], "properties": {
            "id": {"type": "string"}, "object": {"const": "audio.voice"}, "name": {"type": "string"},
            "type": {"enum": ["audio_sample", "prompt"]}, "created_at": {"type": "integer"},
            "transcript": {"type": "string"}, "duration_s": {"type": "number"}, "prompt": nullable_string,
            "builtin": {"type": "boolean"},
        }},
        "VoiceList": {"type": "object", "required": ["object", "data"], "properties": {
            "object": {"const": "list"}, "data": {"type": "array", "items": {"$ref": "#/components/schemas/Voice"}}}},
        "CaptionedSpeech": {"type": "object", "required": ["audio", "format", "sample_rate", "segments"], "properties": {
            "audio": {"type": "string", "contentEncoding": "base64"}, "format": {"type": "string"},
            "sample_rate": {"type": "integer"}, "segments": {"type": "array", "items": {
                "type": "object", "required": ["text", "start", "end"], "properties": {
                    "text": {"type": "string"}, "start": {"type": "number"}, "end": {"type": "number"}}}}}},
        "Lexicon": {"type": "object", "required": ["name", "object", "language", "entries"], "properties": {
            "name": {"type": "string"}, "object": {"const": "audio.lexicon"}, "language": {"type": "string"},
            "voice": {"type": ["string", "null"]},
            "entries": {"type": "object", "additionalProperties": {"type": "string"}}, "updated_at": {"type": "integer"}}},
        "LexiconList": {"type": "object", "required": ["object", "data"], "properties": {
            "object": {"const": "list"}, "data": {"type": "array", "items": {"$ref": "#/components/schemas/Lexicon"}}}},
        "DeletedLexicon": {"type": "object", "required": ["name", "object", "deleted"], "properties": {
            "name": {"type": "string"}, "object": {"const": "audio.lexicon.deleted"}, "deleted": {"type": "boolean"}}},
        "DeletedVoice": {"type": "object", "required": ["id", "object", "deleted"], "properties": {
            "id": {"type": "string"}, "object": {"const": "audio.voice.deleted"}, "deleted": {"type": "boolean"}}},
        "JobItemRequest": {"type": "object", "required": ["input"], "additionalProperties": False, "properties": {
            **speech, "id": {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"},
            "captions": {"type": "boolean", "description": "also write captions.srt and captions.vtt (a chunk per sentence)"},
            "timestamp_granularities": {"type": "array", "minItems": 1, "items": {"enum": ["segment", "word"]}, "default": ["segment"],
                                        "description": "with captions: word gives a cue per word (--asr-model; without it a 400)"}}},
        "Job": {"type": "object", "required": ["id", "object", "owner", "state", "created_at", "progress"], "properties": {
            "id": {"type": "string"}, "object": {"const": "job"},
            "owner": {"type": "string", "description": "the owner id of the key that made it (its name=, else a hash); default on a keyless server"},
            "state": {"enum": ["queued", "running", "completed", "failed", "cancelled"]},
            "created_at": {"type": "number"}, "finished_at": {"type": ["number", "null"]}, "cancelled_at": {"type": ["number", "null"]},
            "progress": {"type": "object", "additionalProperties": {"type": "integer"}},
            "items": {"type": "array", "items": {"type": "object", "required": ["index", "state"], "properties": {
                "index": {"type": "integer"}, "id": nullable_string,
                "state": {"enum": ["queued", "running", "done", "failed", "cancelled"]},
                "attempts": {"type": "integer"}, "audio_url": nullable_string}}},
            "not_before": nullable_string, "deadline": nullable_string,
            "estimated_finish": nullable_string, "deadline_at_risk": {"type": "boolean"},
            "callback_url": nullable_string,
            "callback": {"type": ["object", "null"], "properties": {
                "state": {"enum": ["pending", "delivered", "failed"]},
                "attempts": {"type": "integer"}, "last_status": {"type": ["integer", "null"]},
                "last_error": nullable_string}},
            "warm_up": {"type": ["object", "null"]},
            "waiting_for_space": {"type": ["object", "null"], "properties": {
                "since": {"type": "number"}, "needed_bytes": {"type": "integer"},
                "error": {"type": "string"}}},
        }},
        "JobList": {"type": "object", "required": ["object", "data", "has_more"], "properties": {
            "object": {"const": "list"}, "data": {"type": "array", "items": {"$ref": "#/components/schemas/Job"}},
            "first_id": nullable_string, "last_id": nullable_string, "has_more": {"type": "boolean"}}},
        "Model": {"type": "object", "required": ["id", "object", "created", "owned_by"], "properties": {
            "id": {"type": "string"}, "object": {"const": "model"}, "created": {"type": "integer"}, "owned_by": {"type": "string"}}},
        "ModelList": {"type": "object", "required": ["object", "data"], "properties": {
            "object": {"const": "list"}, "data": {"type": "array", "items": {"$ref": "#/components/schemas/Model"}}}},
    }  # fmt: skip
