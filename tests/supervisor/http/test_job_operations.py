"""supervisor/http/job_operations.py: the job routes' OpenAPI operations. The body's bounds follow
the settings and the callback rules, a job is answered 202, and an item's audio and captions say
which media types they come in."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from supervisor.http import job_operations
from supervisor.http.openapi_parts import Parts
from supervisor.jobs import callbacks
from supervisor.settings import Settings
from supervisor.speech.audio import formats

SETTINGS = Settings(engine="null", max_job_items=7)
PARTS = Parts.of(SETTINGS.http, SETTINGS.speech)


def body_schema(operation: dict[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = operation["requestBody"]["content"]["application/json"]["schema"]
    return schema


def test_a_job_is_answered_202_with_its_bounds_from_the_settings() -> None:
    operation = job_operations.create_job(PARTS)
    assert "202" in operation["responses"] and "200" not in operation["responses"]
    for status in ("400", "401", "409", "413", "415", "503", "507"):
        assert status in operation["responses"], status
    assert body_schema(operation)["properties"]["items"]["maxItems"] == 7
    (key,) = operation["parameters"]
    assert (key["name"], key["in"], key["required"]) == ("Idempotency-Key", "header", False)


def test_the_job_body_takes_only_its_fields_and_a_well_formed_secret() -> None:
    schema = body_schema(job_operations.create_job(PARTS))
    schema = {**schema, "properties": {**schema["properties"], "items": {"type": "array"}}}
    jsonschema.validate({"items": [{}], "callback_secret": "s" * 32}, schema)
    for wrong in (
        {},  # no items
        {"items": [{}], "colour": "red"},
        {"items": [{}], "callback_secret": "two words " * 4},
        {"items": [{}], "callback_secret": "short"},
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(wrong, schema)
    secret = schema["properties"]["callback_secret"]
    assert secret["pattern"] == callbacks.SECRET_PATTERN and secret["writeOnly"] is True


def test_the_job_list_pages_within_its_bounds() -> None:
    operation = job_operations.list_jobs(PARTS)
    limit = next(p for p in operation["parameters"] if p["name"] == "limit")["schema"]
    jsonschema.validate(100, limit)
    for wrong in (0, 101, "ten"):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(wrong, limit)
    assert limit["default"] == 20
    assert {p["name"] for p in operation["parameters"]} == {"limit", "after"}


def test_an_items_audio_comes_in_every_format_and_is_409_until_done() -> None:
    operation = job_operations.get_job_item_audio(PARTS)
    assert set(operation["responses"]["200"]["content"]) == set(formats.MEDIA_TYPES.values())
    assert {"404", "409"} <= set(operation["responses"])


def test_each_captions_format_has_its_own_operation_and_media_type() -> None:
    srt = job_operations.job_item_captions("srt", "application/x-subrip")(PARTS)
    vtt = job_operations.job_item_captions("vtt", "text/vtt")(PARTS)
    assert srt["operationId"] == "getJobItemCaptionsSrt"
    assert vtt["operationId"] == "getJobItemCaptionsVtt"
    assert list(srt["responses"]["200"]["content"]) == ["application/x-subrip"]
    assert list(vtt["responses"]["200"]["content"]) == ["text/vtt"]
    assert {"404", "409"} <= set(srt["responses"])


def test_every_job_operation_has_its_own_id() -> None:
    made = [
        job_operations.create_job,
        job_operations.list_jobs,
        job_operations.get_job,
        job_operations.cancel_job,
        job_operations.get_job_item_audio,
        job_operations.job_item_captions("srt", "application/x-subrip"),
        job_operations.job_item_captions("vtt", "text/vtt"),
    ]
    ids = [operation(PARTS)["operationId"] for operation in made]
    assert len(set(ids)) == len(ids)
    assert job_operations.cancel_job(PARTS)["responses"]["404"]["content"]
