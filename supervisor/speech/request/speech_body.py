"""The speech request body, declared once: each field's JSON type, bounds, default and
description, as a pydantic model.

From the declaration come the validation of a body (strict: JSON's own types, no coercion; a
null is a field not given), the error that names the field in `param`
(supervisor/speech/request/body_errors.py), and the OpenAPI document's `CreateSpeechRequest`
(`properties`). The limits that are settings (the longest text, the default format and step
count) make one model per set of values (`model_for`).

Rules across fields, and checks that need server state (SSML, dialogue scripts, free-form
instructions, voices, limits after expansion), stay in supervisor/speech/request/schemas.py and run
after the declaration validates. Other systems' field names are declared here for the document
(deprecated); supervisor/speech/request/aliases.py folds them into ours before validation.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, NamedTuple, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    PlainValidator,
    create_model,
)
from pydantic.fields import FieldInfo
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError, core_schema

from sidecar.shared.tiers import SERVICE_TIERS
from supervisor.errors import InvalidRequest
from supervisor.settings.sections import SpeechSettings
from supervisor.speech.audio import delivery, formats
from supervisor.speech.audio.loudness import Target
from supervisor.speech.request.field_checks import OPENAI_VOICES, language, voice
from supervisor.speech.text import dialogue as dialogue_script

MODELS = ("omnivoice", "tts-1", "tts-1-hd", "gpt-4o-mini-tts")
STREAM_FORMATS = ("audio", "sse")
CHUNK_MODES = ("concurrent", "sequential", "none")
MAX_SEED = 2**63 - 1
MAX_DURATION_S = 600.0
MAX_PAUSE_MS = 10_000
REQUEST_TIMEOUT_S = (1.0, 1200.0)
# OpenAI's `service_tier` when a request names none: interactive, but bulk for a job item.
SPEECH_TIER, JOB_TIER = "auto", "flex"

T = TypeVar("T")


@dataclass(frozen=True)
class OneOf:
    """A string field's choices: validated after the string type, and the schema's `enum`."""

    choices: tuple[str, ...]

    def _check(self, value: str) -> str:
        if value not in self.choices:
            raise PydanticCustomError("one_of", "not one of the choices", {"choices": self.choices})
        return value

    def __get_pydantic_core_schema__(
        self, source: Any, handler: Callable[[Any], CoreSchema]
    ) -> CoreSchema:
        return core_schema.no_info_after_validator_function(self._check, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: Callable[[CoreSchema], JsonSchemaValue]
    ) -> JsonSchemaValue:
        return {**handler(schema), "enum": list(self.choices)}


def checked(check: Callable[[Any], T]) -> Callable[[Any], T]:
    """A check that raises InvalidRequest (its own message and `param`) as a field validator, so
    that pydantic reports it in field order beside the others."""

    def run(value: Any) -> T:
        try:
            return check(value)
        except InvalidRequest as exc:
            raise PydanticCustomError("invalid_request", "{message}", {"error": exc}) from None

    return run


def _some_text(text: str) -> str:
    if not text.strip():
        raise InvalidRequest("'input' must contain some text.", param="input")
    return text


VOICE_SCHEMA: dict[str, object] = {
    "anyOf": [
        {"type": "string", "enum": ["auto", *OPENAI_VOICES]},
        {"type": "string", "minLength": 1, "pattern": r"\S", "description": "a saved voice's name"},
        {
            "type": "object",
            "properties": {"id": {"type": "string", "minLength": 1}},
            "required": ["id"],
            "additionalProperties": False,
        },
    ],
    "default": "auto",
}
LOUDNESS_SCHEMA: dict[str, object] = {
    "anyOf": [
        {"type": "string", "enum": list(delivery.PRESETS)},
        {
            "type": "object",
            "properties": {
                "lufs": {
                    "type": "number",
                    "minimum": delivery.LUFS_RANGE[0],
                    "maximum": delivery.LUFS_RANGE[1],
                },
                "true_peak_db": {
                    "type": "number",
                    "minimum": delivery.TRUE_PEAK_RANGE[0],
                    "maximum": delivery.TRUE_PEAK_RANGE[1],
                    "default": delivery.DEFAULT_TRUE_PEAK_DB,
                },
            },
            "required": ["lufs"],
            "additionalProperties": False,
        },
    ],
    "description": "normalise the whole output (buffered: the answer starts when it is all made)",
}


def written_schema(schema: dict[str, object]) -> Callable[[JsonSchemaValue], None]:
    """A field's JSON Schema written out, for a field whose check is code (`checked`)."""

    def write(out: JsonSchemaValue) -> None:
        out.clear()
        out.update(schema)

    return write


def _default(value: JsonValue) -> dict[str, JsonValue]:
    """The schema's default where the body's is None: what the server uses when none is given."""
    return {"default": value}


def _deprecated(description: str) -> Any:
    return Field(None, deprecated=True, description=description)


# The fields whose check is code: `voice` as a string or {"id": ...}, a language by id or name,
# a loudness preset or target. Named here, as a field of the same name would hide the check.
Voice = Annotated[str, PlainValidator(checked(voice))]
Language = Annotated[str | None, AfterValidator(checked(language))]
Loudness = Annotated[Target | None, PlainValidator(checked(delivery.parse_loudness))]
Text = Annotated[str, AfterValidator(checked(_some_text))]


class SpeechBody(BaseModel):
    """The fields of a speech request (POST /v1/audio/speech, its captioned sibling, a job item,
    and the one-shot forms less their own fields), validated; None where not given."""

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)

    model: Annotated[str, OneOf(MODELS)] = Field(
        "omnivoice", description="every name is the one OmniVoice model"
    )
    input: Text = Field(
        description="the text to speak; long text is chunked",
        json_schema_extra={"minLength": 1, "pattern": r"\S"},
    )
    voice: Voice = Field("auto", json_schema_extra=written_schema(VOICE_SCHEMA))
    instructions: str | None = Field(
        None,
        description="voice design: comma-separated items such as 'female, low pitch, british "
        "accent'; free-form text is read for the items it names (X-OmniVoice-Instructions "
        "says which)",
    )
    response_format: Annotated[str, OneOf(formats.FORMATS)]  # default: the settings' (model_for)
    speed: float = Field(1.0, ge=0.25, le=4.0, allow_inf_nan=False)
    stream_format: Annotated[str, OneOf(STREAM_FORMATS)] = "audio"
    language: Language = Field(
        None, description="a language id ('en') or English name ('German'); none: the model tells"
    )
    num_step: int = Field(ge=1, le=128)  # default: the settings' (model_for)
    guidance_scale: float | None = Field(
        None, ge=0.0, le=10.0, allow_inf_nan=False, json_schema_extra=_default(2.0)
    )
    duration: float | None = Field(
        None,
        gt=0.0,
        le=MAX_DURATION_S,
        allow_inf_nan=False,
        description="seconds of audio to make, instead of the estimate",
    )
    chunk_mode: Annotated[str, OneOf(CHUNK_MODES)] = "concurrent"
    seed: int | None = Field(None, ge=0, le=MAX_SEED)
    denoise: bool | None = Field(None, json_schema_extra=_default(True))
    lexicon: str | None = Field(
        None, description="a saved lexicon's name (PUT /v1/audio/lexicons/{name})"
    )
    dialogue: bool = Field(False, description="the input is one turn per line: '[voice] text'")
    pause_ms: int | None = Field(
        None,
        ge=0,
        le=MAX_PAUSE_MS,
        description="silence between dialogue turns",
        json_schema_extra=_default(dialogue_script.DEFAULT_PAUSE_MS),
    )
    normalize: bool | None = Field(
        None,
        description="spell out numbers, dates, times, currency, units and abbreviations "
        "(default: the server's --normalize)",
    )
    sample_rate: int | None = Field(
        None,
        ge=delivery.SAMPLE_RATES[0],
        le=delivery.SAMPLE_RATES[1],
        description="the answer's sample rate (default 24000; 8000 for mulaw and alaw)",
    )
    loudness: Loudness = Field(None, json_schema_extra=written_schema(LOUDNESS_SCHEMA))
    # Other systems' names (docs/MIGRATING.md): folded into ours before validation
    # (supervisor/speech/request/aliases.py); declared for the document.
    stream: bool | None = _deprecated(
        "omnivoice-triton-server: true = stream_format sse (pcm unless response_format says)"
    )
    speaker: str | None = Field(
        None,
        min_length=1,
        deprecated=True,
        description="omnivoice-triton-server: voice (wins over it)",
    )
    instruct: str | None = _deprecated("OmniVoice-Studio: instructions")
    description: str | None = _deprecated("OmniVoice-Studio: instructions")
    service_tier: Annotated[str, OneOf(tuple(SERVICE_TIERS))] | None = Field(
        None,
        description="auto, default, priority: interactive; flex: bulk, behind interactive "
        "work (a job item's default)",
        json_schema_extra=_default(SPEECH_TIER),
    )
    request_timeout_s: float | None = Field(
        None,
        ge=REQUEST_TIMEOUT_S[0],
        le=REQUEST_TIMEOUT_S[1],
        allow_inf_nan=False,
        description="answer 504 if not done by then (default: the server's --request-timeout-s)",
    )
    preprocess_prompt: bool | None = _deprecated(
        "OmniVoice-Studio: accepted; a saved voice was preprocessed when saved"
    )
    chunk_duration: float | None = Field(
        None,
        ge=1.0,
        le=MAX_DURATION_S,
        allow_inf_nan=False,
        description="this request's chunk length, seconds",
    )
    chunk_threshold: float | None = Field(
        None,
        ge=0.0,
        le=2 * MAX_DURATION_S,
        allow_inf_nan=False,
        description="input estimated at up to this many seconds stays one chunk",
    )


FIELDS = tuple(SpeechBody.model_fields)
_JSON_TYPES: dict[Any, str] = {float: "number", int: "integer", bool: "boolean"}


def form_types() -> dict[str, str]:
    """The JSON type of each number and boolean field, which a form's string is converted to."""
    out: dict[str, str] = {}
    for name, field in SpeechBody.model_fields.items():
        for kind in (field.annotation, *typing.get_args(field.annotation)):
            if kind in _JSON_TYPES:
                out[name] = _JSON_TYPES[kind]
    return out


class Limits(NamedTuple):
    """What the settings decide of the body: the longest text and two defaults. A tuple: made
    and hashed for every request, to find its model."""

    max_chars: int
    response_format: str
    num_step: int

    @classmethod
    def of(cls, settings: SpeechSettings) -> Limits:
        return cls(
            settings.max_input_chars,
            settings.default_response_format,
            settings.num_step,
        )


TEXTS = ("input", "instructions", "instruct", "description")  # at most --max-input-chars


def _with(name: str, **setting: Any) -> Any:
    """A field as SpeechBody declares it, with a limit or default that is a setting."""
    field = SpeechBody.model_fields[name]
    return field.annotation, FieldInfo.merge_field_infos(field, Field(**setting))


@functools.lru_cache(maxsize=8)
def model_for(limits: Limits) -> type[SpeechBody]:
    """The speech body with the settings' limits and defaults."""
    model: type[SpeechBody] = create_model(
        "CreateSpeechRequest",
        __base__=SpeechBody,
        response_format=_with("response_format", default=limits.response_format),
        num_step=_with("num_step", default=limits.num_step),
        **{name: _with(name, max_length=limits.max_chars) for name in TEXTS},
    )
    return model


class NoTitles(GenerateJsonSchema):
    """JSON Schema without the titles pydantic makes of field names."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


def properties(limits: Limits) -> dict[str, dict[str, object]]:
    """CreateSpeechRequest's properties: every field but `input` may be null (not given), and a
    field not given has the default its schema says, or none said where the server decides."""
    schema = model_for(limits).model_json_schema(schema_generator=NoTitles)
    out: dict[str, dict[str, object]] = {}
    fields: dict[str, dict[str, object]] = schema["properties"]
    for name, field in fields.items():
        if field.get("default", 0) is None:
            del field["default"]
        out[name] = field if name == "input" else nullable(field)
    return out


def nullable(schema: dict[str, object]) -> dict[str, object]:
    """An optional field: null means "not given" (the default), as some clients send it."""
    out = dict(schema)
    choices = out.get("anyOf")
    if isinstance(choices, list):
        if {"type": "null"} not in choices:
            out["anyOf"] = [*choices, {"type": "null"}]
        return out
    kind = out.get("type")
    if kind is not None:
        kinds = kind if isinstance(kind, list) else [kind]
        out["type"] = [*kinds, *([] if "null" in kinds else ["null"])]
    values = out.get("enum")
    if isinstance(values, list) and None not in values:
        out["enum"] = [*values, None]
    return out
