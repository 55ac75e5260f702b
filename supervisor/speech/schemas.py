"""Typed requests, and their validation from JSON bodies and forms. Pure: no I/O, no globals.

Every check names the offending field in the error's `param` and says what would be accepted.
Unknown fields are refused, never ignored: a misspelt `num_steps` must not silently run with
the default. Form fields (the clone and design forms) arrive as strings and are converted to
the type the JSON field has before the same checks run.

Other systems' field names are folded into ours first (supervisor/speech/aliases.py); the
checks of one field each are in supervisor/speech/field_checks.py.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from typing import Any

from sidecar.shared.errors import InvalidInstruct
from sidecar.shared.languages import language_ids, language_names
from sidecar.shared.text import contains_cjk
from sidecar.shared.tiers import SERVICE_TIERS, Tier
from sidecar.shared.voice_design import resolve_instruct
from supervisor.errors import InvalidRequest
from supervisor.settings import Settings
from supervisor.speech import delivery
from supervisor.speech.aliases import aliases_for, fold_aliases, refuse_unknown
from supervisor.speech.field_checks import (
    boolean,
    choice,
    integer,
    number,
    string,
    type_name,
    wrong_type,
)
from supervisor.speech.formats import FORMATS
from supervisor.speech.instructions import read_free_form
from supervisor.speech.loudness import Target
from supervisor.speech.text import dialogue as dialogue_script
from supervisor.speech.text import ssml

MODELS = ("omnivoice", "tts-1", "tts-1-hd", "gpt-4o-mini-tts")
STREAM_FORMATS = ("audio", "sse")
CHUNK_MODES = ("concurrent", "sequential", "none")
MAX_SEED = 2**63 - 1
MAX_DURATION_S = 600.0
MAX_PAUSE_MS = 10_000
# OpenAI's `service_tier` when a request names none: interactive, but bulk for a job item.
SPEECH_TIER, JOB_TIER = "auto", "flex"

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

SPEECH_FIELDS = frozenset(
    {
        "model",
        "input",
        "voice",
        "instructions",
        "response_format",
        "speed",
        "stream_format",
        "language",
        "num_step",
        "guidance_scale",
        "duration",
        "chunk_mode",
        "seed",
        "denoise",
        "normalize",
        "lexicon",
        "dialogue",
        "pause_ms",
        "sample_rate",
        "loudness",
        "service_tier",
    }
)
OPTION_FIELDS = SPEECH_FIELDS - {"voice"}  # what the one-shot forms take besides their own fields

REQUEST_TIMEOUT_S = (1.0, 1200.0)

# How a form's string becomes the JSON type of each field.
_FORM_TYPES: dict[str, str] = {
    "speed": "number",
    "guidance_scale": "number",
    "duration": "number",
    "num_step": "integer",
    "seed": "integer",
    "denoise": "boolean",
    "preprocess": "boolean",
    "normalize": "boolean",
    "dialogue": "boolean",
    "pause_ms": "integer",
    "stream": "boolean",
    "request_timeout_s": "number",
    "preprocess_prompt": "boolean",
    "chunk_duration": "number",
    "chunk_threshold": "number",
    "sample_rate": "integer",
}


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


def service_tier(body: dict[str, Any], default: str) -> Tier:
    """OpenAI's `service_tier` as a tier: `auto`, `default` and `priority` are interactive,
    `flex` is bulk; anything else is a 400."""
    return SERVICE_TIERS[choice(body, "service_tier", tuple(SERVICE_TIERS), default)]


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


# ---------------------------------------------------------------- requests


def speech_request(
    body: Any,
    settings: Settings,
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
    body: dict[str, Any], settings: Settings, strict_instructions: bool, default_tier: str
) -> SpeechRequest:
    if "input" not in body:
        raise InvalidRequest("Missing required parameter: 'input'.", param="input")
    text = string(body, "input", max_chars=settings.max_input_chars) or ""
    if not text.strip():
        raise InvalidRequest("'input' must contain some text.", param="input")
    dialogue = boolean(body, "dialogue") or False
    pause_ms = integer(body, "pause_ms", 0, MAX_PAUSE_MS)
    if pause_ms is not None and not dialogue:
        raise InvalidRequest(
            "'pause_ms' is the silence between dialogue turns: send it with 'dialogue': true.",
            param="pause_ms",
        )
    if dialogue and ssml.is_ssml(text):
        raise InvalidRequest(
            "An SSML input changes voices with <voice name=...>; leave 'dialogue' out.",
            param="dialogue",
        )
    if ssml.is_ssml(text):
        ssml.parse(text)  # a bad document is refused here, before anything is queued
    if dialogue:
        dialogue_script.parse(text, 0)  # likewise a script with a line that has no speaker
    boolean(body, "preprocess_prompt")  # checked, then nothing to do: see ALIASES
    given = string(body, "instructions", max_chars=settings.max_input_chars)
    design, read = free_form_instructions(given, text, strict_instructions)
    request = SpeechRequest(
        model=choice(body, "model", MODELS, "omnivoice"),
        input=text,
        voice=voice(body["voice"]) if body.get("voice") is not None else "auto",
        instructions=design,
        response_format=choice(body, "response_format", FORMATS, settings.default_response_format),
        speed=number(body, "speed", 0.25, 4.0) or 1.0,
        stream_format=choice(body, "stream_format", STREAM_FORMATS, "audio"),
        language=language(string(body, "language")),
        num_step=integer(body, "num_step", 1, 128) or settings.num_step,
        guidance_scale=number(body, "guidance_scale", 0.0, 10.0),
        duration=number(body, "duration", 0.0, MAX_DURATION_S, low_open=True),
        chunk_mode=choice(body, "chunk_mode", CHUNK_MODES, "concurrent"),
        seed=integer(body, "seed", 0, MAX_SEED),
        denoise=boolean(body, "denoise"),
        request_timeout_s=number(body, "request_timeout_s", *REQUEST_TIMEOUT_S),
        chunk_s=number(body, "chunk_duration", 1.0, MAX_DURATION_S),
        whole_s=number(body, "chunk_threshold", 0.0, 2 * MAX_DURATION_S),
        normalize=boolean(body, "normalize"),
        lexicon=string(body, "lexicon"),
        dialogue=dialogue,
        pause_ms=dialogue_script.DEFAULT_PAUSE_MS if pause_ms is None else pause_ms,
        instructions_read=read,
        sample_rate=integer(body, "sample_rate", *delivery.SAMPLE_RATES),
        loudness=delivery.parse_loudness(body.get("loudness")),
        tier=service_tier(body, default_tier),
    )
    delivery.check_rate(request.response_format, request.sample_rate)
    return request


def from_form(fields: dict[str, str]) -> dict[str, Any]:
    """Form strings converted to the JSON types of their fields (anything unconvertible: 400)."""
    out: dict[str, Any] = {}
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


def transcript(value: str | None, settings: Settings, required: bool = True) -> str:
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
