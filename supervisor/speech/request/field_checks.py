"""Checks of one JSON field each: its type, its range or choices, text that UTF-8 can carry, a
voice, a language.

Each names the offending field in the error's `param` (an InvalidRequest, a 400) and says what
would be accepted; None stands for a field not sent. The speech body's fields are validated
against their declaration (supervisor/speech/request/speech_body.py), whose errors are these same
messages (`wrong_type`, `too_long`, `not_one_of`, `out_of_range`, `not_between`); `string` and
`boolean` check the fields that other bodies take.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Mapping
from typing import Any

from sidecar.shared.languages import language_ids, language_names
from supervisor.errors import InvalidRequest


def json_integer(digits: str) -> int | float:
    """A JSON integer as read here: one with more digits than Python reads as an int (4,300 by
    default) is the float it overflows to (infinity), so that its field's own check refuses it,
    naming the field, rather than the whole body being called invalid JSON."""
    limit = sys.get_int_max_str_digits()
    return int(digits) if not limit or len(digits.lstrip("-")) <= limit else float(digits)


def json_loads(body: bytes | str) -> Any:
    """`json.loads`, its integers read by `json_integer`."""
    return json.loads(body, parse_int=json_integer)


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def unencodable(body: Any) -> str | None:
    """Where in a parsed body a string holds a lone surrogate (a JSON `\\ud800` escape, or raw
    CESU-8 bytes, which `json.loads` lets through): its param path, else None. Such text can be
    encoded as UTF-8 for neither a sidecar nor the job store. A loop, not recursion: a body may
    nest as deep as the JSON parser allows."""
    pending: list[tuple[str, Any]] = [("", body)]
    while pending:
        param, value = pending.pop()
        if isinstance(value, str) and not _encodable(value):
            return param or "body"
        if isinstance(value, dict):
            for key, item in value.items():
                if not _encodable(key):
                    return param or "body"
                pending.append((f"{param}.{key}" if param else key, item))
        elif isinstance(value, list):
            pending.extend((f"{param}[{index}]", item) for index, item in enumerate(value))
    return None


def refuse_unencodable(value: Any) -> None:
    """A 400 naming the first string of a body that is not valid Unicode text."""
    where = unencodable(value)
    if where is not None:
        error = InvalidRequest(
            f"'{where}' holds text that is not valid Unicode "
            "(a lone UTF-16 surrogate); send UTF-8 text.",
            param=where,
        )
        error.code = "invalid_text"
        raise error


def type_name(value: Any) -> str:
    return {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "an array",
        dict: "an object",
        type(None): "null",
    }.get(type(value), type(value).__name__)


def wrong_type(key: str, expected: str, value: Any) -> InvalidRequest:
    return InvalidRequest(
        f"Invalid type for '{key}': expected {expected}, but got {type_name(value)} instead.",
        param=key,
    )


def string(
    body: Mapping[str, object],
    key: str,
    default: str | None = None,
    *,
    max_chars: int | None = None,
) -> str | None:
    value = body.get(key)
    if value is None:
        return default
    if not isinstance(value, str):
        raise wrong_type(key, "a string", value)
    if max_chars is not None and len(value) > max_chars:
        raise too_long(key, value, max_chars)
    return value


def too_long(key: str, value: str, max_chars: int) -> InvalidRequest:
    error = InvalidRequest(
        f"'{key}' is {len(value)} characters long; at most {max_chars} are accepted.", param=key
    )
    error.code = "string_above_max_length"
    return error


def not_one_of(key: str, choices: tuple[str, ...], value: str) -> InvalidRequest:
    return InvalidRequest(f"'{key}' must be one of {', '.join(choices)}; got {value!r}.", param=key)


def out_of_range(
    key: str, value: int | float, low: float, high: float, *, low_open: bool = False
) -> InvalidRequest:
    """A number field's value outside its bounds (or not finite)."""
    bound = f"greater than {low:g}" if low_open else f"at least {low:g}"
    return InvalidRequest(
        f"'{key}' must be {bound} and at most {high:g}; got {shown(value)}.", param=key
    )


def shown(value: int | float) -> str:
    """A number as an error message quotes it: at most 20 digits of a long integer."""
    text = repr(value)
    return text if len(text) <= 24 else f"{text[:20]}... ({len(text)} digits)"


def not_between(key: str, value: int, low: int, high: int) -> InvalidRequest:
    """An integer field's value outside its bounds."""
    return InvalidRequest(
        f"'{key}' must be between {low} and {high}; got {shown(value)}.", param=key
    )


def boolean(body: Mapping[str, object], key: str) -> bool | None:
    value = body.get(key)
    if value is None or isinstance(value, bool):
        return value
    raise wrong_type(key, "a boolean", value)


# ---------------------------------------------------------------- voices and languages

# OpenAI's voice names, each a designed voice: a voice-design instruct and a fixed default
# seed (derived from the name), so that "alloy" sounds the same from one request to the next.
OPENAI_VOICES: dict[str, str] = {
    "alloy": "female, young adult, moderate pitch, american accent",
    "ash": "male, young adult, low pitch, american accent",
    "ballad": "male, young adult, moderate pitch, british accent",
    "cedar": "male, middle-aged, low pitch, american accent",
    "coral": "female, young adult, high pitch, american accent",
    "echo": "male, middle-aged, moderate pitch, american accent",
    "fable": "male, middle-aged, moderate pitch, british accent",
    "marin": "female, middle-aged, moderate pitch, american accent",
    "nova": "female, teenager, high pitch, american accent",
    "onyx": "male, middle-aged, very low pitch, american accent",
    "sage": "female, middle-aged, low pitch, british accent",
    "shimmer": "female, young adult, very high pitch, british accent",
    "verse": "male, elderly, low pitch, american accent",
}
RESERVED_VOICES = frozenset({"auto", *OPENAI_VOICES})


@functools.lru_cache(maxsize=1)
def _languages() -> tuple[frozenset[str], dict[str, str]]:
    names = {name.lower(): lang_id for lang_id, name in language_names().items()}
    return frozenset(language_ids()), names


def language(value: str | None) -> str | None:
    """A language id or English name (any case; 'en-US' counts as 'en'); None for auto. 400 if unknown."""
    if value is None or value.strip().lower() in ("", "auto", "none"):
        return None
    ids, names = _languages()
    for candidate in (
        value,
        value.lower(),
        value.split("-")[0].lower(),
        value.split("_")[0].lower(),
    ):
        if candidate in ids:
            return candidate
    found = names.get(value.strip().lower())
    if found is None:
        raise InvalidRequest(
            f"Unknown language {value!r}: use one of the 646 ids the model knows, such as 'en', 'zh', 'ja', 'de' "
            "(the list is sidecar/data/languages.tsv), or an English name such as 'German', or leave it out.",
            param="language",
        )
    return found


def voice(value: Any) -> str:
    """`voice` as sent: a string, or OpenAI's {"id": ...}; reserved names are matched in any case."""
    if isinstance(value, dict):
        if set(value) != {"id"}:
            raise InvalidRequest("'voice' as an object takes exactly one key, 'id'.", param="voice")
        value = value["id"]
        if not isinstance(value, str):
            raise wrong_type("voice.id", "a string", value)
    elif not isinstance(value, str):
        raise wrong_type("voice", 'a string or an object {"id": ...}', value)
    if not value.strip():
        raise InvalidRequest(
            "'voice' must not be empty: use 'auto', an OpenAI voice name or a saved voice.",
            param="voice",
        )
    return value.lower() if value.lower() in RESERVED_VOICES else value
