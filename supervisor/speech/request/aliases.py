"""Other systems' field names, folded into ours before the checks (docs/MIGRATING.md).

Clients of omnivoice-triton-server and OmniVoice-Studio send fields of their own; `ALIASES`
lists each with the field of ours it means, and `fold_aliases` rewrites a body into our fields,
remembering which name was sent so that an error names the field the client sent.
"""

from __future__ import annotations

import functools

from supervisor.errors import InvalidRequest
from supervisor.speech.request.field_checks import boolean

# Fields other systems' clients send: name -> (our field it stands for, who sends it). An alias
# is accepted wherever its field is; `request_timeout_s`, `chunk_duration` and `chunk_threshold`
# have no field of OpenAI's and are ours under those names.
ALIASES: dict[str, tuple[str, str]] = {
    "stream": (
        "stream_format",
        "omnivoice-triton-server: true means stream_format 'sse' (and pcm unless response_format says otherwise)",
    ),
    "speaker": ("voice", "omnivoice-triton-server: the voice; given with 'voice', it wins"),
    "instruct": ("instructions", "OmniVoice-Studio"),
    "description": ("instructions", "OmniVoice-Studio"),
    "request_timeout_s": (
        "request_timeout_s",
        "omnivoice-triton-server: the request's deadline, 1 to 1200 s",
    ),
    "preprocess_prompt": (
        "preprocess_prompt",
        "OmniVoice-Studio: a saved voice's prompt was preprocessed when it was saved; no effect here",
    ),
    "chunk_duration": (
        "chunk_duration",
        "OmniVoice-Studio: this request's chunk length in seconds (--chunk-s)",
    ),
    "chunk_threshold": (
        "chunk_threshold",
        "OmniVoice-Studio: this request's input estimated at up to this many seconds stays whole",
    ),
}
DESIGN_PREFIX = (
    "design:"  # omnivoice-triton-server: voice "design:<items>" is instructions "<items>"
)


@functools.lru_cache(maxsize=32)  # a handful of routes' field sets, asked for every request
def aliases_for(allowed: frozenset[str]) -> frozenset[str]:
    """The alias fields a route takes: those whose field it takes, and those that are ours alone
    (named as their own target) on every route that takes an input text."""
    return frozenset(
        name
        for name, (target, _) in ALIASES.items()
        if target in allowed or (name == target and "input" in allowed)
    )


def fold_aliases(
    body: dict[str, object], allowed: frozenset[str]
) -> tuple[dict[str, object], dict[str, str]]:
    """The body in our fields, and for each field set from an alias the alias's name (for errors)."""
    out = dict(body)
    sent: dict[str, str] = {}
    if "stream" in out and "stream_format" in allowed:
        _fold_stream(out, sent)
    for name in ("instruct", "description"):
        if name in out and "instructions" in allowed:
            value = out.pop(name)
            if value is None:
                continue
            if out.get("instructions") is not None and out["instructions"] != value:
                raise InvalidRequest(
                    f"'{name}' and '{sent.get('instructions', 'instructions')}' are both given and differ; "
                    "they are the same field (voice design): send one.",
                    param=name,
                )
            out["instructions"] = value
            sent["instructions"] = name
    if "speaker" in out and "voice" in allowed:
        speaker = out.pop("speaker")
        if speaker is not None:
            out["voice"] = speaker
            sent["voice"] = "speaker"
    voice = out.get("voice")
    if isinstance(voice, str) and voice.strip().lower().startswith(DESIGN_PREFIX):
        out["voice"] = "auto"
        if (
            out.get("instructions") is None
        ):  # as omnivoice-triton-server: instructions win over the voice
            out["instructions"] = voice.strip()[len(DESIGN_PREFIX) :].strip()
            sent["instructions"] = sent.get("voice", "voice")
    return out, sent


def _fold_stream(out: dict[str, object], sent: dict[str, str]) -> None:
    """`stream` (omnivoice-triton-server's) as our `stream_format`, in place."""
    stream = boolean(out, "stream")
    del out["stream"]
    if not stream:
        return
    if out.get("stream_format") not in (None, "sse"):
        raise InvalidRequest(
            f"'stream': true asks for server-sent events, but 'stream_format' is {out['stream_format']!r}; "
            "send one of them.",
            param="stream",
        )
    out["stream_format"] = "sse"
    sent["stream_format"] = "stream"
    if out.get("response_format") is None:
        out["response_format"] = (
            "pcm"  # what omnivoice-triton-server streams, whatever its response_format
        )


def refuse_unknown(
    body: dict[str, object], allowed: frozenset[str], also: frozenset[str] = frozenset()
) -> None:
    """A 400 for any field not in `allowed` nor in `also` (aliases); the message lists `allowed` and
    the aliases that are fields of their own (request_timeout_s), not other names for ours."""
    unknown = sorted(set(body) - allowed - also)
    if unknown:
        listed = allowed | {name for name in also if name in ALIASES and ALIASES[name][0] == name}
        raise InvalidRequest(
            f"Unrecognized request argument(s): {', '.join(unknown)}. "
            f"Accepted: {', '.join(sorted(listed))}.",
            param=unknown[0],
        )
