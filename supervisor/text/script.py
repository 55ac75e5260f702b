"""A speech request's text as the spans the model reads: SSML parsed, then normalised if asked."""

from __future__ import annotations

from dataclasses import replace

from supervisor.schemas import SpeechRequest
from supervisor.settings import Settings
from supervisor.text import ssml
from supervisor.text.normalize import normalize
from supervisor.text.spans import Script, Span


def read(request: SpeechRequest, settings: Settings) -> Script:
    """The request's input as spans, each as the model should read it."""
    if ssml.is_ssml(request.input):
        script = ssml.parse(request.input, request.language)
    else:
        script = Script((Span(request.input),))
    wanted = request.normalize if request.normalize is not None else settings.normalize
    if not wanted:
        return script
    spans = tuple(replace(s, text=normalize(s.text, s.language or request.language)) for s in script.spans)
    return replace(script, spans=spans)
