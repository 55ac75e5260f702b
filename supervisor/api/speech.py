"""`POST /v1/audio/speech`, minimal: JSON in, WAV (or raw PCM) out.

Enough of the OpenAI request to drive the whole path end to end: `input`, and optionally
`model`, `voice` (auto or an OpenAI voice name, both meaning the model's own voice for now),
`instructions` (voice design), `language`, `seed`, `speed`, `duration`, `num_step` and
`response_format` wav or pcm. The full API (formats, streaming, saved voices) is its own issue.
"""

from __future__ import annotations

import io
import json
import uuid
import wave
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from sidecar.protocol import Item
from supervisor.api import services
from supervisor.errors import InvalidRequest
from supervisor.scheduler import Priority

MAX_INPUT_CHARS = 4096
MODELS = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts", "omnivoice")
OPENAI_VOICES = ("alloy", "ash", "ballad", "coral", "echo", "fable", "nova", "onyx", "sage", "shimmer", "verse", "marin", "cedar")
FIELDS = {"model", "input", "voice", "instructions", "language", "seed", "speed", "duration", "num_step", "response_format"}
MEDIA_TYPES = {"wav": "audio/wav", "pcm": "audio/pcm"}


def wav_bytes(pcm: bytes, sample_rate: int) -> bytes:
    """16-bit mono PCM in a WAV container."""
    out = io.BytesIO()
    with wave.open(out, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(sample_rate)
        wav.writeframes(pcm)
    return out.getvalue()


def _optional(body: dict[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    value = body.get(key)
    if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
        raise InvalidRequest(f"'{key}' has the wrong type", param=key)
    return value


def parse(body: Any, default_num_step: int) -> tuple[Item, str]:
    """The request body as a generation item and a response format; InvalidRequest if it is not one."""
    if not isinstance(body, dict):
        raise InvalidRequest("the body must be a JSON object")
    unknown = sorted(set(body) - FIELDS)
    if unknown:
        raise InvalidRequest(f"unknown field(s): {', '.join(unknown)}", param=unknown[0])
    text = body.get("input")
    if not isinstance(text, str) or not text.strip():
        raise InvalidRequest("'input' must be a non-empty string", param="input")
    if len(text) > MAX_INPUT_CHARS:
        raise InvalidRequest(f"'input' is longer than {MAX_INPUT_CHARS} characters", param="input")
    model = body.get("model", "omnivoice")
    if model not in MODELS:
        raise InvalidRequest(f"'model' must be one of {', '.join(MODELS)}", param="model")
    voice = body.get("voice", "auto")
    if voice not in ("auto", *OPENAI_VOICES):
        raise InvalidRequest("'voice' must be 'auto' or an OpenAI voice name (saved voices come with the voices API)", param="voice")
    fmt = body.get("response_format", "wav")
    if fmt not in MEDIA_TYPES:
        raise InvalidRequest(f"'response_format' must be one of {', '.join(MEDIA_TYPES)} for now", param="response_format")
    item: Item = {"id": uuid.uuid4().hex, "text": text, "num_step": default_num_step}
    for key, target, kind in (("instructions", "instruct", str), ("language", "language", str), ("seed", "seed", int),
                              ("speed", "speed", (int, float)), ("duration", "duration", (int, float)), ("num_step", "num_step", int)):
        value = _optional(body, key, kind)
        if value is not None:
            item[target] = value  # type: ignore[literal-required]
    if not 1 <= item["num_step"] <= 128:  # type: ignore[typeddict-item]
        raise InvalidRequest("'num_step' must be between 1 and 128", param="num_step")
    return item, fmt


async def speech(request: Request) -> Response:
    svc = services(request)
    try:
        body = json.loads(await request.body())
    except (ValueError, UnicodeDecodeError):
        raise InvalidRequest("the body is not valid JSON") from None
    item, fmt = parse(body, svc.settings.num_step)
    [future] = svc.scheduler.submit([item], Priority.INTERACTIVE)
    result = await future
    pcm = result["audio"]
    content = wav_bytes(pcm, result["sample_rate"]) if fmt == "wav" else pcm
    return Response(content, media_type=MEDIA_TYPES[fmt], headers={"X-Seed": str(result["seed"])})
