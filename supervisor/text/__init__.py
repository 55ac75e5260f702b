"""What happens to a request's text before it is chunked: normalisation (numbers, dates and
the like spelled out), and the tables of each language it needs."""

from __future__ import annotations

from supervisor.schemas import SpeechRequest
from supervisor.settings import Settings
from supervisor.text.normalize import normalize


def spoken_text(request: SpeechRequest, settings: Settings) -> str:
    """The request's input as the model should read it."""
    wanted = request.normalize if request.normalize is not None else settings.normalize
    return normalize(request.input, request.language) if wanted else request.input
