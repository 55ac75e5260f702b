"""A `session.config`: the speech request's fields but `input`, checked as a speech request is
(`speech.parse`, a 400's message here), and the session's own fields (`SESSION_FIELDS`).

A config comes first, and again between utterances; a valid one replaces the last whole.
"""

from __future__ import annotations

from typing import Any

from supervisor.errors import InvalidRequest
from supervisor.http.routes import speech
from supervisor.http.stream.session import Session
from supervisor.speech import words

SESSION_FIELDS = frozenset({"type", "api_key", "stream_audio", "timestamp_granularities"})


def configure(session: Session, body: dict[str, Any]) -> None:
    if session.count or session.segmenter.text.strip():
        raise InvalidRequest(
            "session.config comes between utterances: end this one with input.done first",
            param="type",
        )
    if "input" in body:
        raise InvalidRequest(
            "the text comes in input.text messages, not in session.config", param="input"
        )
    stream_audio = body.get("stream_audio", True)
    if not isinstance(stream_audio, bool):
        raise InvalidRequest("'stream_audio' must be true or false", param="stream_audio")
    timed_words = words.wants_words(body, session.svc.asr)
    config = {k: v for k, v in body.items() if k not in SESSION_FIELDS}
    assert session.owner is not None
    speech.parse(session.svc, session.owner, {**config, "input": "A sentence."})  # a 400 here
    session.config, session.stream_audio, session.timed_words = config, stream_audio, timed_words
