"""A job's JSON body, `{"items": [...]}`, parsed one item at a time.

`json.loads` holds the GIL for the whole body, so even in a worker thread a 60 MiB body of
millions of tiny items would stall the event loop for seconds and take a gigabyte of memory
before its item count could be checked. Here each item is decoded on its own
(`JSONDecoder.raw_decode`), so a worker thread hands the GIL back between items, and the count
is checked as the items are read: the item after --max-job-items ends the parse with a 400.
The schedule's fields (`not_before`, `deadline`, `callback_url`) are read whole; any other
top-level field is refused before its value is read. The result is what `json.loads`
would give for a body it accepts.
"""

from __future__ import annotations

import json
import re
from typing import Any

from supervisor.errors import InvalidRequest
from supervisor.jobs.schedule import FIELDS as SCHEDULE_FIELDS
from supervisor.speech.request import aliases, field_checks

_DECODER = json.JSONDecoder(parse_int=field_checks.json_integer)
_SPACE = re.compile(r"[ \t\n\r]*")
FIELD = "items"
FIELDS = frozenset({FIELD}) | SCHEDULE_FIELDS


def not_json() -> InvalidRequest:
    return InvalidRequest("We could not parse the JSON body of your request: it is not valid JSON.")


def _skip(text: str, at: int) -> int:
    match = _SPACE.match(text, at)
    assert match is not None  # the pattern matches the empty string
    return match.end()


def _expect(text: str, at: int, *marks: str) -> tuple[str, int]:
    """The mark at `at` (after spaces) and the position after it; not_json if it is none of them."""
    at = _skip(text, at)
    if at < len(text) and text[at] in marks:
        return text[at], at + 1
    raise not_json()


def parse(body: bytes, max_items: int) -> Any:
    """The body as JSON; InvalidRequest for bad JSON, a field other than "items", or too many
    items."""
    try:
        # As json.loads(bytes) decodes.
        text = body.decode(json.detect_encoding(body), "surrogatepass")
    except (UnicodeDecodeError, LookupError):
        raise not_json() from None
    at = _skip(text, 0)
    if not text.startswith("{", at):
        raise InvalidRequest('The request body must be a JSON object {"items": [...]}.')
    parsed: dict[str, object] = {}
    mark, at = _expect(text, at + 1, '"', "}")
    while mark == '"':
        key, at = _DECODER.raw_decode(text, at - 1)
        aliases.refuse_unknown({key: None}, FIELDS)
        if key in parsed:
            raise InvalidRequest(f"'{key}' is given more than once.", param=key)
        _, at = _expect(text, at, ":")
        at = _skip(text, at)
        if key == FIELD and text.startswith("[", at):
            parsed[key], at = _items(text, at + 1, max_items)
        else:
            # Not an array: job_items says what it must be.
            parsed[key], at = _DECODER.raw_decode(text, at)
        mark, at = _expect(text, at, ",", "}")
        if mark == ",":
            mark, at = _expect(text, at, '"')
    if _skip(text, at) != len(text):
        raise not_json()
    return parsed


def _items(text: str, at: int, max_items: int) -> tuple[list[Any], int]:
    items: list[Any] = []
    at = _skip(text, at)
    if text.startswith("]", at):
        return items, at + 1
    while True:
        if len(items) == max_items:
            raise InvalidRequest(
                f"A job takes at most {max_items} items; this one has more.", param=FIELD
            )
        item, at = _DECODER.raw_decode(text, _skip(text, at))
        items.append(item)
        mark, at = _expect(text, at, ",", "]")
        if mark == "]":
            return items, at
