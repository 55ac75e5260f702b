"""supervisor/http/openapi_parts.py: the pieces the operations share. Error responses with
Retry-After where one comes, every optional speech field nullable, bounds from the settings."""

from __future__ import annotations

from supervisor.http.openapi_parts import Parts, error, form, responses, speech_properties
from supervisor.settings import Settings
from supervisor.speech.audio import formats

SETTINGS = Settings(engine="null", max_input_chars=321, max_upload_mb=3.0, max_reference_s=12.0)


def test_an_error_response_is_the_error_schema_with_retry_after_where_it_comes() -> None:
    for status in (429, 503):
        assert error(status)["headers"]["Retry-After"]["schema"]["minimum"] == 1
    for status in (400, 401, 413, 500, 504):
        assert "headers" not in error(status)
    ref = error(400)["content"]["application/json"]["schema"]["$ref"]
    assert ref == "#/components/schemas/ErrorResponse"


def test_responses_list_401_and_the_statuses_given() -> None:
    ok = {"description": "fine"}
    assert list(responses(ok, 400, 429)) == ["200", "401", "400", "429"]
    assert responses(ok)["200"] is ok


def test_every_speech_field_but_input_may_be_null() -> None:
    speech = speech_properties(SETTINGS.speech)
    assert speech["input"]["maxLength"] == 321
    assert "null" not in str(speech["input"].get("type"))
    for name, schema in speech.items():
        if name == "input":
            continue
        kinds = schema.get("type")
        nullable = (
            (isinstance(kinds, list) and "null" in kinds)
            or {"type": "null"} in schema.get("anyOf", [])
            or None in schema.get("enum", [])
        )
        assert nullable, name


def test_the_shared_parts_follow_the_settings() -> None:
    parts = Parts.of(SETTINGS.http, SETTINGS.speech)
    assert "3 MiB and 12 s" in parts.upload["description"]
    assert "voice" in parts.speech and "voice" not in parts.options
    assert set(formats.MEDIA_TYPES.values()) < set(parts.audio["content"])
    assert parts.reference["file"] is parts.upload


def test_a_form_takes_only_its_fields() -> None:
    shape = form({"a": {"type": "string"}}, ["a"])
    assert shape["additionalProperties"] is False and shape["required"] == ["a"]
