"""supervisor/jobs/item_fields.py: a job item's own fields, declared once; what the schema says
of them is what the checks refuse."""

from __future__ import annotations

import re
from typing import Any

import pytest

from supervisor.errors import InvalidRequest
from supervisor.jobs.item_fields import FIRST_CHUNK_S, MAX_TITLE_CHARS, ItemFields, properties
from supervisor.speech.request.body_errors import validated


def refused(**fields: Any) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as caught:
        validated(ItemFields, fields)
    return caught.value


@pytest.mark.parametrize("name", ["a", "chapter-01", "x.y_z", "9" * 128])
def test_ids_the_pattern_takes_are_taken(name: str) -> None:
    assert re.fullmatch(properties()["id"]["pattern"], name)
    assert validated(ItemFields, {"id": name}).id == name


@pytest.mark.parametrize("name", ["", "-a", "a b", "../x", "x" * 129, 7, ["a"]])
def test_ids_the_pattern_refuses_are_400s(name: Any) -> None:
    if isinstance(name, str):
        assert not re.fullmatch(properties()["id"]["pattern"], name)
    error = refused(id=name)
    assert error.param == "id" and "it becomes a file name" in error.message


def test_title_and_captions() -> None:
    assert properties()["title"]["anyOf"][0]["maxLength"] == MAX_TITLE_CHARS
    error = refused(title="t" * (MAX_TITLE_CHARS + 1))
    assert (error.param, error.code) == ("title", "string_above_max_length")
    assert refused(captions="yes").message == (
        "Invalid type for 'captions': expected a boolean, but got a string instead."
    )
    fields = validated(ItemFields, {"captions": True, "title": None, "input": "Hi."})
    assert (fields.captions, fields.title, fields.id) == (True, None, None)


def test_word_timing_is_only_declared() -> None:
    shown = properties()["timestamp_granularities"]
    assert shown["items"]["enum"] == ["segment", "word"] and shown["minItems"] == 1
    assert validated(ItemFields, {"timestamp_granularities": "any"}).timestamp_granularities


def test_a_first_chunk_length_is_checked_on_the_way_in() -> None:
    shown = properties()["first_chunk_s"]["anyOf"][0]
    assert (shown["minimum"], shown["maximum"]) == FIRST_CHUNK_S
    assert validated(ItemFields, {"first_chunk_s": 5}).first_chunk_s == 5.0
    for wrong in (FIRST_CHUNK_S[0] - 0.5, FIRST_CHUNK_S[1] + 1):
        assert refused(first_chunk_s=wrong).param == "first_chunk_s"
    assert refused(first_chunk_s="5").param == "first_chunk_s"
    assert refused(first_chunk_s=True).param == "first_chunk_s"
