"""What reading a speech request body costs the supervisor, per request, best of five rounds.

    PYTHONPATH=$PWD .venv/bin/python bench/request_contract_cost.py [--rounds 20000]

Arms, on one realistic body (an OpenAI request with a few of our fields):

    server path      `json_loads` of the bytes, then `schemas.speech_request`: what a route does
    speech_request   the body already parsed: unknown fields, aliases, the declaration, the rules
    pydantic alone   the declaration's model validating the parsed body (no rules across fields)
    msgspec alone    the same fields, types and bounds as a msgspec Struct, from the parsed body
                     and from the bytes (needs `pip install msgspec`; skipped without it)

The two "alone" arms price the library each would be; the rules in code cost the same on both.
"""

# Without `from __future__ import annotations`: msgspec reads the Struct's annotations, which
# name a local import.
import argparse
import json
import time
from collections.abc import Callable
from typing import Annotated, Any, Literal

from supervisor.settings import Settings
from supervisor.speech.request import schemas
from supervisor.speech.request.field_checks import json_loads

BODY: dict[str, Any] = {
    "model": "tts-1",
    "input": "The quick brown fox jumps over the lazy dog, then it runs away into the forest.",
    "voice": "alloy",
    "response_format": "wav",
    "speed": 1.1,
    "num_step": 32,
    "guidance_scale": 2.0,
    "seed": 1234,
    "language": "en",
    "sample_rate": 24000,
}


def best_us(call: Callable[[], object], rounds: int) -> float:
    for _ in range(rounds // 10):
        call()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(rounds):
            call()
        best = min(best, (time.perf_counter() - start) / rounds)
    return best * 1e6


def msgspec_arms(raw: bytes) -> dict[str, Callable[[], object]]:
    try:
        import msgspec
    except ImportError:
        return {}
    from msgspec import Meta

    class Speech(msgspec.Struct, forbid_unknown_fields=True):
        input: Annotated[str, Meta(max_length=4096)]
        model: Literal["omnivoice", "tts-1", "tts-1-hd", "gpt-4o-mini-tts"] = "omnivoice"
        voice: str | dict[str, str] = "auto"
        instructions: str | None = None
        response_format: Literal["mp3", "opus", "aac", "flac", "wav", "pcm", "mulaw", "alaw"] = (
            "mp3"
        )
        speed: Annotated[float, Meta(ge=0.25, le=4.0)] = 1.0
        stream_format: Literal["audio", "sse"] = "audio"
        language: str | None = None
        num_step: Annotated[int, Meta(ge=1, le=128)] = 32
        guidance_scale: Annotated[float, Meta(ge=0, le=10)] | None = None
        duration: Annotated[float, Meta(gt=0, le=600)] | None = None
        chunk_mode: Literal["concurrent", "sequential", "none"] = "concurrent"
        seed: Annotated[int, Meta(ge=0, le=2**63 - 1)] | None = None
        denoise: bool | None = None
        sample_rate: Annotated[int, Meta(ge=8000, le=48000)] | None = None

    decoder = msgspec.json.Decoder(Speech)
    return {
        "msgspec alone (parsed body)": lambda: msgspec.convert(BODY, Speech),
        "msgspec alone (from bytes)": lambda: decoder.decode(raw),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20000)
    args = parser.parse_args()
    settings = Settings(engine="null")
    raw = json.dumps(BODY).encode()
    arms: dict[str, Callable[[], object]] = {
        "server path (bytes)": lambda: schemas.speech_request(json_loads(raw), settings.speech),
        "speech_request (parsed body)": lambda: schemas.speech_request(BODY, settings.speech),
        "json_loads alone": lambda: json_loads(raw),
    }
    try:
        from supervisor.speech.request.speech_body import Limits, model_for
    except ImportError:  # a tree from before the declaration
        pass
    else:
        model = model_for(Limits.of(settings.speech))
        arms["pydantic alone (parsed body)"] = lambda: model.model_validate(BODY)
        arms["pydantic alone (from bytes)"] = lambda: model.model_validate_json(raw)
    arms.update(msgspec_arms(raw))
    for name, call in arms.items():
        print(f"{name:32} {best_us(call, args.rounds):8.2f} µs per request")


if __name__ == "__main__":
    main()
