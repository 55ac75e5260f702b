"""supervisor/http/operations.py: each non-job route's OpenAPI operation. Every one has its own id
and lists 401 where a key is asked for; the forms take what their routes take; the bounds come
from the settings and the lexicon rules."""

from __future__ import annotations

import inspect
from typing import Any

import jsonschema
import pytest

from supervisor.http import operations
from supervisor.http.openapi_parts import SPEECH_ERRORS, Parts
from supervisor.settings import Settings
from supervisor.speech.audio import formats
from supervisor.speech.stores import lexicons as lexicon_rules

SETTINGS = Settings(engine="null", max_upload_mb=3.0, max_reference_s=12.0)
PARTS = Parts.of(SETTINGS.http, SETTINGS.speech)
OPERATIONS = {
    name: function(PARTS)
    for name, function in inspect.getmembers(operations, inspect.isfunction)
    if function.__module__ == operations.__name__ and not name.startswith("_")
}
OPEN = {"console", "console_page", "console_asset", "health", "ready"}  # asked no key


def form_of(operation: dict[str, Any], media: str) -> dict[str, Any]:
    schema: dict[str, Any] = operation["requestBody"]["content"][media]["schema"]
    return schema


def test_every_operation_has_its_own_id_and_lists_401_where_a_key_is_asked() -> None:
    ids = [operation["operationId"] for operation in OPERATIONS.values()]
    assert len(ids) == len(set(ids)) and len(ids) > 20
    for name, operation in OPERATIONS.items():
        assert ("401" in operation["responses"]) == (name not in OPEN), name


def test_a_speech_route_answers_audio_or_sse_and_every_speech_error() -> None:
    for name in ("create_speech", "design_speech", "clone_speech"):
        answers = OPERATIONS[name]["responses"]
        assert set(formats.MEDIA_TYPES.values()) | {"text/event-stream"} == set(
            answers["200"]["content"]
        )
        assert {str(status) for status in SPEECH_ERRORS} <= set(answers), name
    assert "422" in OPERATIONS["clone_speech"]["responses"]  # a reference it cannot read


def test_design_takes_three_media_types_and_clone_only_multipart() -> None:
    design = OPERATIONS["design_speech"]
    assert set(design["requestBody"]["content"]) == {
        "multipart/form-data",
        "application/x-www-form-urlencoded",
        "application/json",
    }
    assert form_of(design, "application/json")["required"] == ["input", "instructions"]
    assert "voice" not in form_of(design, "application/json")["properties"]
    clone = OPERATIONS["clone_speech"]
    assert list(clone["requestBody"]["content"]) == ["multipart/form-data"]
    shape = form_of(clone, "multipart/form-data")
    assert shape["required"] == ["input", "file", "transcript"]
    assert "3 MiB and 12 s" in shape["properties"]["file"]["description"]


def test_a_saved_voice_is_201_and_its_name_follows_the_rule() -> None:
    voice = OPERATIONS["create_voice"]
    assert "201" in voice["responses"] and "200" not in voice["responses"]
    name = form_of(voice, "multipart/form-data")["properties"]["name"]
    for good in ("a", "Anna-2_b", "x" * 64):
        jsonschema.validate(good, name)
    for wrong in ("", "-lead", "_lead", "has space", "x" * 65, "ü"):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(wrong, name)


def test_a_lexicon_is_bounded_by_the_lexicon_rules() -> None:
    put = OPERATIONS["put_lexicon"]
    assert {"200", "201"} <= set(put["responses"])
    schema = form_of(put, "application/json")
    jsonschema.validate({"language": "en", "entries": {"GIF": "jif"}}, schema)
    for wrong in (
        {"language": "en"},
        {"language": "en", "entries": {"GIF": ""}},
        {"language": "en", "entries": {"GIF": "x" * (lexicon_rules.MAX_ENTRY_CHARS + 1)}},
        {"language": "en", "entries": {}, "colour": "red"},
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(wrong, schema)
    assert schema["properties"]["entries"]["maxProperties"] == lexicon_rules.MAX_ENTRIES


def test_ready_says_when_to_come_back_and_the_purge_says_what_it_removed() -> None:
    unready = OPERATIONS["ready"]["responses"]["503"]
    assert unready["headers"]["Retry-After"]["schema"]["type"] == "integer"
    purged = OPERATIONS["purge_cache"]["responses"]["200"]["content"]["application/json"]
    jsonschema.validate(
        {"object": "cache.purge", "enabled": True, "deleted": 2, "bytes": 10}, purged["schema"]
    )
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"object": "cache.purge", "enabled": True}, purged["schema"])
