"""A `session.config`: the speech request's fields but `input`, checked as a speech request is
(`speech.parse`, a 400's message here), and the session's own fields (`SESSION_FIELDS`).

A config comes first, and again between utterances; a valid one replaces the last whole. One
refused for a field leaves the session refusing to speak (`refused`: each `input.text` and
`input.done` gets its error) until a valid one comes, so that nothing is spoken in a format or
voice the client did not ask for.

`hold_for_checks` (default false): whether each segment's audio waits for the ASR round trip
(`--asr-model`) to hear it and pass it, a chunk failing it made again up to --qa-retries times,
before any of it is sent. That costs each segment's first audio one round trip per chunk, and a
whole generation per retry; without it the audio goes out as it is made, unheard
(`asr=skipped` in `audio.done`'s `qa`). The sidecar's own checks come with the audio either way.
"""

from __future__ import annotations

from supervisor.errors import InvalidRequest, ServerError
from supervisor.http.routes import speech
from supervisor.http.stream.session import Session
from supervisor.speech.checks import word_timestamps

SESSION_FIELDS = frozenset(
    {"type", "api_key", "stream_audio", "timestamp_granularities", "hold_for_checks"}
)


def configure(session: Session, body: dict[str, object]) -> None:
    if session.count or session.segmenter.text.strip():
        raise InvalidRequest(
            "session.config comes between utterances: end this one with input.done first",
            param="type",
        )
    try:
        checked(session, body)
    except ServerError as exc:
        session.refused = exc
        raise
    session.refused = None


def checked(session: Session, body: dict[str, object]) -> None:
    """The session's config from `body`, or the error that refuses it."""
    if "input" in body:
        raise InvalidRequest(
            "the text comes in input.text messages, not in session.config", param="input"
        )
    flags: dict[str, bool] = {}
    for name, default in (("stream_audio", True), ("hold_for_checks", False)):
        flag = body.get(name, default)
        if not isinstance(flag, bool):
            raise InvalidRequest(f"'{name}' must be true or false", param=name)
        flags[name] = flag
    timed_words = word_timestamps.wants_words(body, session.svc.asr)
    config = {k: v for k, v in body.items() if k not in SESSION_FIELDS}
    assert session.owner is not None
    speech.parse(session.svc, session.owner, {**config, "input": "A sentence."})  # a 400 here
    session.config, session.timed_words = config, timed_words
    session.stream_audio, session.hold_for_checks = (
        flags["stream_audio"],
        flags["hold_for_checks"],
    )


def speaking(session: Session) -> None:
    """Refuse text while the last config stands refused (its error, said again)."""
    if session.refused is not None:
        error = type(session.refused)(
            "nothing is spoken until a valid session.config comes; the last was refused: "
            + session.refused.message,
            param=session.refused.param,
        )
        error.code = session.refused.code
        raise error
