"""supervisor/speech/request/body_errors.py: pydantic's errors as ours, each naming its field with the
message the field's own check writes."""

from __future__ import annotations

from typing import Any

import pytest

from supervisor.errors import InvalidRequest
from supervisor.settings import Settings
from supervisor.speech.request.body_errors import validated
from supervisor.speech.request.speech_body import Limits, model_for

MODEL = model_for(Limits.of(Settings(engine="null", max_input_chars=50).speech))


def refused(**fields: Any) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as caught:
        validated(MODEL, {"input": "Hi.", **fields})
    return caught.value


@pytest.mark.parametrize(
    ("fields", "param", "message"),
    [
        (
            {"speed": "fast"},
            "speed",
            "Invalid type for 'speed': expected a number, but got a string",
        ),
        ({"speed": True}, "speed", "expected a number, but got a boolean"),
        ({"num_step": 2.0}, "num_step", "expected an integer, but got a number"),
        ({"dialogue": "yes"}, "dialogue", "expected a boolean, but got a string"),
        ({"lexicon": 3}, "lexicon", "expected a string, but got an integer"),
        ({"speed": 5}, "speed", "'speed' must be at least 0.25 and at most 4; got 5."),
        ({"speed": float("inf")}, "speed", "must be at least 0.25 and at most 4; got inf"),
        ({"duration": 0}, "duration", "must be greater than 0 and at most 600"),
        ({"seed": -1}, "seed", "'seed' must be between 0 and 9223372036854775807; got -1."),
        ({"speed": 10**400}, "speed", "digits)"),
        ({"chunk_mode": "fast"}, "chunk_mode", "must be one of concurrent, sequential, none"),
        ({"chunk_mode": 1}, "chunk_mode", "expected a string, but got an integer"),
        ({"voice": {"id": 1}}, "voice.id", "expected a string"),
        ({"language": "Klingon"}, "language", "Unknown language"),
        ({"loudness": "loud"}, "loudness", "'loudness' must be"),
        ({"input": " "}, "input", "'input' must contain some text."),
    ],
)
def test_each_kind_of_error_names_its_field(
    fields: dict[str, Any], param: str, message: str
) -> None:
    error = refused(**fields)
    assert (error.status, error.param) == (400, param)
    assert message in error.message


def test_too_long_a_text_has_openais_code() -> None:
    error = refused(instructions="x" * 51)
    assert error.param == "instructions" and error.code == "string_above_max_length"
    assert "51 characters long; at most 50" in error.message


def test_the_first_wrong_field_in_declaration_order_is_named() -> None:
    assert refused(seed=-1, model="x", speed="fast").param == "model"


def test_null_is_a_field_not_given() -> None:
    body = validated(MODEL, {"input": "Hi.", "speed": None, "voice": None, "seed": None})
    assert (body.speed, body.voice, body.seed) == (1.0, "auto", None)
