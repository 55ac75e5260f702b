"""What a request speaks with: its `Voice`, and how a voice named in its text (SSML `<voice>`)
becomes one. The request's own, read by the plan and the stores alike."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sidecar.shared.protocol import VoicePayload


@dataclass(frozen=True)
class Voice:
    """What a request speaks with."""

    instruct: str | None = None  # voice design
    prompt: VoicePayload | None = None  # a saved or cloned voice
    seed: int | None = None  # used when the request names no seed (OpenAI voice names)


VoiceResolver = Callable[[str], Voice]  # a voice name in the text (SSML <voice>) to its Voice
