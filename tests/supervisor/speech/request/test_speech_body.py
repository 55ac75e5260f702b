"""supervisor/speech/request/speech_body.py: the speech body declared once. The OpenAPI schema it writes
and the validation it does agree: every bound the schema states is where the checks refuse."""

from __future__ import annotations

from typing import Any

import pytest

from supervisor.errors import InvalidRequest
from supervisor.settings import Settings
from supervisor.speech.request import schemas, speech_body
from supervisor.speech.request.speech_body import Limits, model_for, properties

SETTINGS = Settings(engine="null", max_input_chars=321, num_step=24, default_response_format="wav")
LIMITS = Limits.of(SETTINGS.speech)


def _bounds(schema: dict[str, Any]) -> dict[str, Any]:
    """The number schema of a property (inside its anyOf with null, if any)."""
    for option in schema.get("anyOf", [schema]):
        if "minimum" in option or "exclusiveMinimum" in option:
            return option
    return {}


BOUNDED = sorted(name for name, schema in properties(LIMITS).items() if _bounds(schema))


def test_the_bounded_fields_are_the_numbers() -> None:
    assert set(BOUNDED) >= {"speed", "num_step", "seed", "duration", "sample_rate", "pause_ms"}


@pytest.mark.parametrize("name", BOUNDED)
def test_each_bound_the_schema_states_is_where_the_checks_refuse(name: str) -> None:
    bounds = _bounds(properties(LIMITS)[name])
    integer = "integer" in bounds["type"]
    step = 1 if integer else 1e-6
    extra = {"dialogue": True, "input": "[alloy] Hi."} if name == "pause_ms" else {}
    low = bounds.get("minimum", bounds.get("exclusiveMinimum"))
    accepted = [bounds["maximum"], low + step if "exclusiveMinimum" in bounds else low]
    for value in accepted:
        schemas.speech_request({"input": "Hi.", **extra, name: value}, SETTINGS.speech)
    for value in (bounds["maximum"] + step, low - step if "minimum" in bounds else low):
        with pytest.raises(InvalidRequest) as caught:
            schemas.speech_request({"input": "Hi.", **extra, name: value}, SETTINGS.speech)
        assert caught.value.param == name
        assert str(low if integer else f"{low:g}") in caught.value.message


def test_the_settings_make_the_limits_and_defaults() -> None:
    shown = properties(LIMITS)
    assert shown["input"]["maxLength"] == 321
    assert shown["response_format"]["default"] == "wav"
    assert shown["num_step"]["default"] == 24
    body = model_for(LIMITS).model_validate({"input": "Hi."})
    assert (body.response_format, body.num_step, body.speed) == ("wav", 24, 1.0)
    with pytest.raises(InvalidRequest) as caught:
        schemas.speech_request({"input": "x" * 322}, SETTINGS.speech)
    assert caught.value.code == "string_above_max_length"


def test_the_models_are_made_once_per_set_of_limits() -> None:
    assert model_for(Limits.of(SETTINGS.speech)) is model_for(LIMITS)
    assert model_for(Limits.of(Settings(engine="null").speech)) is not model_for(LIMITS)


def test_fields_the_server_decides_show_no_default() -> None:
    shown = properties(LIMITS)
    assert "default" not in shown["seed"] and "default" not in shown["sample_rate"]
    assert shown["guidance_scale"]["default"] == 2.0
    assert shown["service_tier"]["default"] == speech_body.SPEECH_TIER


def test_the_speech_fields_are_the_declarations_less_other_systems_names() -> None:
    assert set(speech_body.FIELDS) > schemas.SPEECH_FIELDS
    assert {"stream", "speaker", "instruct", "description"}.isdisjoint(schemas.SPEECH_FIELDS)
    assert properties(LIMITS)["speaker"]["deprecated"] is True


def test_form_strings_are_converted_to_the_declared_types() -> None:
    types = speech_body.form_types()
    assert (types["speed"], types["seed"], types["denoise"]) == ("number", "integer", "boolean")
    assert "input" not in types and "voice" not in types
