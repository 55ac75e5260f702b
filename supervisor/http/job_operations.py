"""The OpenAPI operations of the job routes (`/v1/jobs...`, docs/JOBS.md): the job's body, its
list, its items' audio and captions.

supervisor/http/route_table.py names one of these beside each job route, as it does those of
supervisor/http/operations.py for the others.
"""

from __future__ import annotations

from supervisor.http.openapi_parts import (
    Operation,
    Parts,
    binary_content,
    error_statuses,
    json_ref,
    request_body,
    responses,
    schema_ref,
)
from supervisor.jobs import schedule
from supervisor.speech.audio import formats


def create_job(p: Parts) -> dict[str, object]:
    return {
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
        "requestBody": request_body(
            {
                "type": "object",
                "required": ["items"],
                "additionalProperties": False,
                "properties": {
                    "items": {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": p.http.max_job_items,
                        "items": schema_ref("JobItemRequest"),
                    },
                    **schedule.properties(),
                },
            }
        ),
        "responses": {
            "202": json_ref("Job", "the job, committed to disk"),
            **error_statuses(400, 401, 409, 413, 415, 503, 507),
        },
    }


def list_jobs(parts: Parts) -> dict[str, object]:
    return {
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
    }


def get_job(parts: Parts) -> dict[str, object]:
    return {
        "operationId": "getJob",
        "responses": responses(json_ref("Job", "the job and its items"), 404),
    }


def cancel_job(parts: Parts) -> dict[str, object]:
    return {
        "operationId": "cancelJob",
        "summary": "Cancel: items not yet done end cancelled",
        "responses": responses(json_ref("Job", "the job"), 404),
    }


def get_job_item_audio(parts: Parts) -> dict[str, object]:
    return {
        "operationId": "getJobItemAudio",
        "summary": "An item's result, once it is done",
        "responses": responses(
            {
                "description": "the audio file",
                "content": binary_content(formats.MEDIA_TYPES.values()),
            },
            404,
            409,
        ),
    }


def job_item_captions(kind: str, media: str) -> Operation:
    """The operation of an item's captions in one format (srt or vtt)."""
    return lambda parts: {
        "operationId": f"getJobItemCaptions{kind.title()}",
        "summary": "An item's captions, if it asked for them",
        "responses": responses(
            {"description": "the captions", "content": {media: {"schema": {"type": "string"}}}},
            404,
            409,
        ),
    }
