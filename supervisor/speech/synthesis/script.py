"""A speech request's text as the spans the model reads: a dialogue script or SSML parsed,
the lexicon applied, then normalised if asked; a text that grew past its limit on the way is a
400 (`cost.check_text`)."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from supervisor.settings import SpeechSettings
from supervisor.speech.request.schemas import SpeechRequest
from supervisor.speech.stores.lexicons import Lexicon
from supervisor.speech.synthesis import cost
from supervisor.speech.text import dialogue, ssml
from supervisor.speech.text.normalize import normalize
from supervisor.speech.text.spans import Script, Span


async def read_off_loop(
    request: SpeechRequest, settings: SpeechSettings, lexicon: Lexicon | None
) -> Script:
    """`read`, in a worker thread when it is work: num2words spells a German number in about a
    millisecond, so normalising an input of numbers would hold the event loop for a second.
    Plain text with no lexicon and no normalisation is read in place."""
    wanted = request.normalize if request.normalize is not None else settings.normalize
    if wanted or lexicon or request.dialogue or ssml.is_ssml(request.input):
        return await asyncio.to_thread(read, request, settings, lexicon)
    return read(request, settings, lexicon)


def read(
    request: SpeechRequest, settings: SpeechSettings, lexicon: Lexicon | None = None
) -> Script:
    """The request's input as spans, each as the model should read it: the lexicon's words
    replaced first (so an entry wins over the normaliser), then normalised if asked."""
    if request.dialogue:
        script = dialogue.parse(request.input, request.pause_ms)
    elif ssml.is_ssml(request.input):
        script = ssml.parse(request.input, request.language)
    else:
        script = Script((Span(request.input),))
    wanted = request.normalize if request.normalize is not None else settings.normalize
    spans = []
    for span in script.spans:
        language = span.language or request.language
        voice = span.voice or request.voice
        applies = lexicon is not None and lexicon.applies_to(language, voice)
        spans.append(
            replace(span, text=lexicon.apply(span.text) if lexicon and applies else span.text)
        )
    # Checked before normalising too: a lexicon's expansion is refused before it is worked on.
    cost.check_text(replace(script, spans=tuple(spans)), settings)
    if wanted:
        spans = [
            replace(span, text=normalize(span.text, span.language or request.language))
            for span in spans
        ]
    read = replace(script, spans=tuple(spans))
    cost.check_text(read, settings)
    return read
