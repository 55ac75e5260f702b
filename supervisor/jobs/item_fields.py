"""A job item's own fields, declared once: `id`, `captions`, `title`, `first_chunk_s` and
`timestamp_granularities`, beside the speech fields an item also takes
(supervisor/speech/request/speech_body.py).

The declaration validates them (supervisor/speech/request/body_errors.py names the field) and writes
their JSON Schema for the OpenAPI document's `JobItemRequest`. `timestamp_granularities` is
only declared here: whether word timing can be had depends on the server's ASR sidecar, so
`speech.checks.word_timestamps.item_wants_words` checks it.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, PlainValidator

from supervisor.errors import InvalidRequest
from supervisor.speech.checks.word_timestamps import GRANULARITIES
from supervisor.speech.request.speech_body import NoTitles, checked, written_schema

# Also a file name: synth writes <id>.<format>.
ITEM_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
MAX_TITLE_CHARS = 500
FIRST_CHUNK_S = (2.0, 30.0)  # the least and most an item's `first_chunk_s` may be


def item_id(value: Any) -> str:
    """The client's name for an item: 1 to 128 letters, digits, '.', '_' or '-'."""
    if not isinstance(value, str) or not ITEM_ID.fullmatch(value):
        raise InvalidRequest(
            "'id' must be 1 to 128 letters, digits, '.', '_' or '-', starting with a "
            f"letter or digit (it becomes a file name); got {value!r}.",
            param="id",
        )
    return value


ItemId = Annotated[str | None, PlainValidator(checked(item_id))]


class ItemFields(BaseModel):
    """What a job item takes besides a speech request's fields; None where not given."""

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)

    id: ItemId = Field(
        None,
        json_schema_extra=written_schema({"type": "string", "pattern": f"^{ITEM_ID.pattern}$"}),
    )
    captions: bool | None = Field(
        None, description="also write captions.srt and captions.vtt (a chunk per sentence)"
    )
    title: str | None = Field(
        None,
        max_length=MAX_TITLE_CHARS,
        description="a name shown with the item (an audiobook's chapter title)",
    )
    first_chunk_s: float | None = Field(
        None,
        ge=FIRST_CHUNK_S[0],
        le=FIRST_CHUNK_S[1],
        description="a long item's first chunk about this many seconds, the rest as usual: in "
        "the concurrent chunk mode the first chunk is the voice prompt of the later ones, and "
        "a short prompt makes them cheaper to run (audiobooks use 5)",
    )
    timestamp_granularities: Any = Field(
        None,
        json_schema_extra=written_schema(
            {
                "type": "array",
                "minItems": 1,
                "items": {"enum": list(GRANULARITIES)},
                "default": ["segment"],
                "description": "with captions: word gives a cue per word (--asr-model; without "
                "it a 400)",
            }
        ),
    )


def properties() -> dict[str, dict[str, object]]:
    """The item's own fields as JobItemRequest's properties."""
    schema = ItemFields.model_json_schema(schema_generator=NoTitles)
    fields: dict[str, dict[str, object]] = schema["properties"]
    return dict(fields)
