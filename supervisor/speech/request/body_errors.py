"""A body validated against its declaration (supervisor/speech/request/speech_body.py), and pydantic's
first error as ours: a 400 naming the field in `param`, with the message the checks of one
field each write (supervisor/speech/request/field_checks.py), read from the field's declared bounds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from annotated_types import Ge, Gt, Le
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from supervisor.errors import InvalidRequest
from supervisor.speech.request import field_checks

Body = TypeVar("Body", bound=BaseModel)

_TYPES = {
    "string_type": "a string",
    "bool_type": "a boolean",
    "int_type": "an integer",
    "float_type": "a number",
}
_RANGE = frozenset({"greater_than", "greater_than_equal", "less_than_equal", "finite_number"})


def validated(
    model: type[Body], body: Mapping[str, object], context: dict[str, object] | None = None
) -> Body:
    """`body` as `model`, its nulls read as fields not given; InvalidRequest naming the first
    field (in declaration order) that is wrong. `context`: what the checks read of the server's
    settings (pydantic's validation context)."""
    try:
        return model.model_validate(
            {k: v for k, v in body.items() if v is not None}, context=context
        )
    except ValidationError as exc:
        raise invalid(model.model_fields, exc.errors()[0]) from None


def invalid(fields: dict[str, FieldInfo], error: ErrorDetails) -> InvalidRequest:
    """One pydantic error as the InvalidRequest the field's check would raise."""
    kind, value = error["type"], error["input"]
    ctx = error.get("ctx") or {}
    if kind == "invalid_request":  # a check in code (field_checks.voice ...): its own error
        found: InvalidRequest = ctx["error"]
        return found
    key = str(error["loc"][0]) if error["loc"] else "body"
    if kind == "one_of":
        return field_checks.not_one_of(key, ctx["choices"], value)
    # `too_long`: a text's length checked after a validator of its own (the input's).
    if kind in ("string_too_long", "too_long") and isinstance(value, str):
        return field_checks.too_long(key, value, ctx["max_length"])
    # An integer past a float's range has no float: it is out of range, not of the wrong type.
    too_big = kind == "float_type" and isinstance(value, int) and not isinstance(value, bool)
    if kind in _RANGE or too_big:
        return _out_of_range(fields[key], key, value)
    if kind in _TYPES:
        return field_checks.wrong_type(key, _TYPES[kind], value)
    return InvalidRequest(f"Invalid value for '{key}': {error['msg']}.", param=key)


def _out_of_range(field: FieldInfo, key: str, value: Any) -> InvalidRequest:
    low: Any = None
    high: Any = None
    low_open = False
    for bound in field.metadata:
        if isinstance(bound, Ge):
            low = bound.ge
        elif isinstance(bound, Gt):
            low, low_open = bound.gt, True
        elif isinstance(bound, Le):
            high = bound.le
    if isinstance(value, int) and not isinstance(value, bool) and isinstance(low, int):
        return field_checks.not_between(key, value, low, high)
    return field_checks.out_of_range(key, value, low, high, low_open=low_open)
