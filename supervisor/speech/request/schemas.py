"""Typed requests, and their validation from JSON bodies and forms. Pure: no I/O, no globals.

Every check names the offending field in the error's `param` and says what would be accepted.
Unknown fields are refused, never ignored: a misspelt `num_steps` must not silently run with
the default. Form fields (the clone and design forms) arrive as strings and are converted to
the type the JSON field has before the same checks run.

A body goes: unknown fields refused, other systems' field names folded into ours
(supervisor/speech/request/aliases.py), each field validated against its declaration
(supervisor/speech/request/speech_body.py), then the rules across fields here (dialogue and SSML,
free-form instructions, a sample rate the format can encode).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from sidecar.shared.errors import InvalidInstruct
from sidecar.shared.text import contains_cjk
from sidecar.shared.tiers import SERVICE_TIERS, Tier
from sidecar.shared.voice_design import resolve_instruct
from supervisor.errors import InvalidRequest
from supervisor.settings.sections import SpeechSettings
from supervisor.speech.audio import delivery
from supervisor.speech.audio.loudness import Target
from supervisor.speech.request.aliases import ALIASES, aliases_for, fold_aliases, refuse_unknown
from supervisor.speech.request.body_errors import validated
from supervisor.speech.request.field_checks import OPENAI_VOICES as OPENAI_VOICES
from supervisor.speech.request.field_checks import RESERVED_VOICES as RESERVED_VOICES
from supervisor.speech.request.field_checks import language as language
from supervisor.speech.request.field_checks import string, type_name
from supervisor.speech.request.field_checks import voice as voice
from supervisor.speech.request.instructions import read_free_form
from supervisor.speech.request.speech_body import CHUNK_MODES as CHUNK_MODES
from supervisor.speech.request.speech_body import FIELDS, Limits, form_types, model_for
from supervisor.speech.request.speech_body import JOB_TIER as JOB_TIER
from supervisor.speech.request.speech_body import MAX_DURATION_S as MAX_DURATION_S
from supervisor.speech.request.speech_body import MAX_PAUSE_MS as MAX_PAUSE_MS
from supervisor.speech.request.speech_body import MAX_SEED as MAX_SEED
from supervisor.speech.request.speech_body import MODELS as MODELS
from supervisor.speech.request.speech_body import REQUEST_TIMEOUT_S as REQUEST_TIMEOUT_S
from supervisor.speech.request.speech_body import SPEECH_TIER as SPEECH_TIER
from supervisor.speech.request.speech_body import STREAM_FORMATS as STREAM_FORMATS
from supervisor.speech.text import dialogue as dialogue_script
from supervisor.speech.text import ssml

# The speech fields: the declaration's, less other systems' names for them (aliases.ALIASES).
SPEECH_FIELDS = frozenset(FIELDS) - frozenset(ALIASES)
OPTION_FIELDS = SPEECH_FIELDS - {"voice"}  # what the one-shot forms take besides their own fields


# How a form's string becomes the JSON type of each field: the declaration's, and the
# clone form's own `preprocess`.
_FORM_TYPES: dict[str, str] = {**form_types(), "preprocess": "boolean"}


@dataclass(frozen=True)
class SpeechRequest:
    """A validated speech request (JSON body or one-shot form)."""

    model: str
    input: str
    voice: str  # "auto", an OpenAI voice name (lower case), or a saved voice's name
    instructions: str | None
    response_format: str
    speed: float
    stream_format: str
    language: str | None
    num_step: int
    guidance_scale: float | None
    duration: float | None
    chunk_mode: str
    seed: int | None
    denoise: bool | None
    request_timeout_s: float | None = (
        None  # answer 504 if not done by then (None: the server's --request-timeout-s)
    )
    chunk_s: float | None = None  # this request's chunk length (None: the server's)
    whole_s: float | None = (
        None  # input estimated at up to this stays one chunk (None: twice the chunk length)
    )
    instructions_read: str | None = None  # X-OmniVoice-Instructions: free-form text was read
    normalize: bool | None = None  # spell out numbers, dates... (None: the server's --normalize)
    lexicon: str | None = None  # a saved lexicon's name
    dialogue: bool = False  # the input is `[voice] text` lines, one turn each
    pause_ms: int = dialogue_script.DEFAULT_PAUSE_MS  # silence between dialogue turns
    sample_rate: int | None = None  # of the answer (None: 24 kHz, or 8 kHz for G.711); delivery
    loudness: Target | None = None  # normalise the whole output to this; delivery
    tier: Tier = Tier.INTERACTIVE  # its `service_tier`: the tier its tasks are scheduled at


def default_seed(voice: str) -> int:
    """The seed an OpenAI voice name uses when the request gives none."""
    return int.from_bytes(hashlib.sha256(voice.encode()).digest()[:8], "big") >> 1


def instructions(value: str | None, text: str, param: str = "instructions") -> str | None:
    """Voice-design items, checked now so that a typo is a 400 that lists the valid items."""
    if value is None or not value.strip():
        return None
    try:
        resolve_instruct(value, use_zh=contains_cjk(text))
    except InvalidInstruct as exc:
        raise InvalidRequest(str(exc), param=param) from None
    return value.strip()


def free_form_instructions(
    value: str | None, text: str, strict: bool
) -> tuple[str | None, str | None]:
    """(design items, X-OmniVoice-Instructions) of OpenAI's instructions: valid items as they are;
    prose, unless `strict` (then a 400), reduced to the items it names."""
    try:
        return instructions(value, text), None
    except InvalidRequest:
        if strict:
            raise
    reading = read_free_form(value or "")
    return instructions(reading.instructions, text), reading.header()


# ---------------------------------------------------------------- requests


def speech_request(
    body: Any,
    settings: SpeechSettings,
    *,
    allowed: frozenset[str] = SPEECH_FIELDS,
    strict_instructions: bool = False,
    default_tier: str = SPEECH_TIER,
) -> SpeechRequest:
    """A JSON body (or a converted form) as a SpeechRequest; InvalidRequest names what is wrong.
    `strict_instructions` (or the setting): instructions that are not design items are a 400.
    `default_tier`: the `service_tier` of a request that names none."""
    if not isinstance(body, dict):
        raise InvalidRequest(f"The request body must be a JSON object, not {type_name(body)}.")
    refuse_unknown(body, allowed, aliases_for(allowed))
    body, sent = fold_aliases(body, allowed)
    try:
        # Free-form reading is for OpenAI's `instructions`; the others' design fields stay strict.
        strict = strict_instructions or settings.strict_instructions or "instructions" in sent
        return _speech_request(body, settings, strict, default_tier)
    except InvalidRequest as exc:
        if exc.param in sent:  # the client sent it under another name: say that name
            exc.param = sent[exc.param]
        raise


def _speech_request(
    body: dict[str, object], settings: SpeechSettings, strict_instructions: bool, default_tier: str
) -> SpeechRequest:
    if body.get("input") is None:
        if "input" not in body:
            raise InvalidRequest("Missing required parameter: 'input'.", param="input")
        raise InvalidRequest("'input' must contain some text.", param="input")
    fields = validated(model_for(Limits.of(settings)), body)
    text = fields.input
    if fields.pause_ms is not None and not fields.dialogue:
        raise InvalidRequest(
            "'pause_ms' is the silence between dialogue turns: send it with 'dialogue': true.",
            param="pause_ms",
        )
    if fields.dialogue and ssml.is_ssml(text):
        raise InvalidRequest(
            "An SSML input changes voices with <voice name=...>; leave 'dialogue' out.",
            param="dialogue",
        )
    if ssml.is_ssml(text):
        ssml.parse(text)  # a bad document is refused here, before anything is queued
    if fields.dialogue:
        dialogue_script.parse(text, 0)  # likewise a script with a line that has no speaker
    design, read = free_form_instructions(fields.instructions, text, strict_instructions)
    request = SpeechRequest(
        model=fields.model,
        input=text,
        voice=fields.voice,
        instructions=design,
        response_format=fields.response_format,
        speed=fields.speed,
        stream_format=fields.stream_format,
        language=fields.language,
        num_step=fields.num_step,
        guidance_scale=fields.guidance_scale,
        duration=fields.duration,
        chunk_mode=fields.chunk_mode,
        seed=fields.seed,
        denoise=fields.denoise,
        request_timeout_s=fields.request_timeout_s,
        chunk_s=fields.chunk_duration,
        whole_s=fields.chunk_threshold,
        normalize=fields.normalize,
        lexicon=fields.lexicon,
        dialogue=fields.dialogue,
        pause_ms=dialogue_script.DEFAULT_PAUSE_MS if fields.pause_ms is None else fields.pause_ms,
        instructions_read=read,
        sample_rate=fields.sample_rate,
        loudness=fields.loudness,
        tier=SERVICE_TIERS[fields.service_tier or default_tier],
    )
    delivery.check_rate(request.response_format, request.sample_rate)
    return request


def from_form(fields: dict[str, str]) -> dict[str, str | float | bool | None]:
    """Form strings converted to the JSON types of their fields (anything unconvertible: 400)."""
    out: dict[str, str | float | bool | None] = {}
    for key, raw in fields.items():
        kind = _FORM_TYPES.get(key)
        if kind is None or raw == "":
            out[key] = raw if raw != "" or kind is None else None
            continue
        try:
            if kind == "number":
                out[key] = float(raw)
            elif kind == "integer":
                out[key] = int(raw)
            elif raw.lower() in ("true", "1", "yes", "on"):
                out[key] = True
            elif raw.lower() in ("false", "0", "no", "off"):
                out[key] = False
            else:
                raise ValueError(raw)
        except ValueError:
            raise InvalidRequest(
                f"Invalid value for '{key}': expected {'an' if kind == 'integer' else 'a'} {kind}, got {raw!r}.",
                param=key,
            ) from None
    return out


def voice_name(value: str | None, kind: str = "voice") -> str:
    """A name for a saved voice (or, by the same rule, a lexicon: `kind`): 1-64 letters, digits,
    '_' or '-'; a voice's not 'auto' nor an OpenAI voice."""
    if value is None or not value:
        raise InvalidRequest("Missing required field: 'name'.", param="name")
    if not (
        len(value) <= 64
        and value[0].isascii()
        and value[0].isalnum()
        and all(c.isascii() and (c.isalnum() or c in "_-") for c in value)
    ):
        raise InvalidRequest(
            f"Invalid {kind} name {value!r}: use 1 to 64 letters, digits, '_' or '-', starting with a letter or digit.",
            param="name",
        )
    if kind == "voice" and value.lower() in RESERVED_VOICES:
        raise InvalidRequest(
            f"{value!r} is reserved (it names a built-in voice); choose another name.", param="name"
        )
    return value


def transcript(value: str | None, settings: SpeechSettings, required: bool = True) -> str:
    """A reference's transcript; "" when it may be left out (an ASR sidecar will hear it)."""
    text = string({"transcript": value}, "transcript", max_chars=settings.max_input_chars)
    if (text is None or not text.strip()) and not required:
        return ""
    if text is None or not text.strip():
        raise InvalidRequest(
            "Missing required field: 'transcript' (what is said in the reference audio).",
            param="transcript",
        )
    return text.strip()
