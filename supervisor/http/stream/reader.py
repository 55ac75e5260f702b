"""A session's reader: the client's messages, each handled on its own (anything malformed gets
an `error` message naming its field and the session goes on), until the client goes, idles out
or closes.

Idle: no message taken for --stream-idle-s (a refused one does not count), and nothing sent or
being made meanwhile. A session without a key must show one within --stream-auth-s of opening,
whatever else it sends. A message that fails in a way nothing here foresaw ends the session with
an `error` and close code 1011, never silently.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Mapping
from typing import Any

from supervisor.errors import InvalidRequest, ServerError
from supervisor.http.stream import access
from supervisor.http.stream.config import configure, speaking
from supervisor.http.stream.session import POLICY, Session
from supervisor.speech.request.field_checks import refuse_unencodable

UNEXPECTED = 1011  # close code (RFC 6455): the server met a condition it did not foresee
MESSAGE_TYPES = "session.config, input.text, input.done or session.close"

log = logging.getLogger("omnivoice.stream")


async def read(session: Session) -> bool:
    """Messages until the client goes, idles out or shows no key in time (False), or closes
    (True)."""
    idle_s = session.svc.settings.http.stream_idle_s or None
    while True:
        if session.key_by is not None:
            left: float | None = session.key_by - time.monotonic()
        else:
            left = None if idle_s is None else session.active_at + idle_s - time.monotonic()
        try:
            message = await asyncio.wait_for(session.ws.receive(), left)
        except asyncio.TimeoutError:
            if await timed_out(session, idle_s):
                return False
            continue
        if message["type"] == "websocket.disconnect":
            return False
        verdict = await handle(session, message)
        if verdict is not None:
            return verdict


async def timed_out(session: Session, idle_s: float | None) -> bool:
    """Whether the wait that timed out ends the session (it is told why and closed)."""
    if session.key_by is not None:
        auth_s = session.svc.settings.http.stream_auth_s
        await session.error(
            f"no API key within {auth_s:g} s: send it first, in a session.config's 'api_key'",
            "invalid_api_key",
            "api_key",
        )
        await session.ws.close(code=POLICY)
        return True
    if not session.idle():
        session.active_at = time.monotonic()
    elif time.monotonic() - session.active_at >= (idle_s or 0):
        await session.error(f"nothing for {idle_s:g} s: the session is closed", "idle")
        await session.ws.close()
        return True
    return False


async def handle(session: Session, message: Mapping[str, Any]) -> bool | None:
    """One client frame; True once the client closes, False once the session is refused."""
    try:
        body = parsed(message)
        if session.owner is None:
            return await authenticate(session, body)
        verdict = dispatch(session, body)
    except ServerError as exc:
        await session.error(exc.message, exc.code, exc.param)
        return None
    except Exception as exc:  # a bug: said, and the session ends rather than go on unsure
        log.exception("a speech session's message failed")
        await session.error(f"internal server error: {type(exc).__name__}", "internal_error")
        await session.ws.close(code=UNEXPECTED)
        return False
    session.active_at = time.monotonic()  # a message taken: the session is not idle
    return verdict


def parsed(message: Mapping[str, Any]) -> Any:
    """A text frame's JSON, every string in it text UTF-8 can carry (else a 400's message)."""
    if message.get("text") is None:
        raise invalid_message("send JSON text frames, not binary ones")
    try:
        body = json.loads(message["text"])
    except RecursionError:
        raise invalid_message("this message nests too deeply to be read") from None
    except ValueError:
        raise invalid_message("this message is not valid JSON") from None
    refuse_unencodable(body)
    return body


def invalid_message(text: str, param: str | None = None) -> InvalidRequest:
    error = InvalidRequest(text, param=param)
    error.code = "invalid_message"
    return error


def dispatch(session: Session, body: Any) -> bool | None:
    """A message of a session that has its key: True once the client closes."""
    kind = body.get("type") if isinstance(body, dict) else None
    if kind == "session.config":
        configure(session, body)
    elif kind == "input.text":
        speaking(session)
        text(session, body)
    elif kind == "input.done":
        speaking(session)
        session.flush()
    elif kind == "session.close":
        session.flush(ending=False)
        session.queue(None)
        return True
    else:
        raise invalid_message(f"unknown message type {kind!r}: send {MESSAGE_TYPES}", "type")
    return None


async def authenticate(session: Session, body: Any) -> bool | None:
    """A key in the first session.config (a browser's way); a wrong one ends the session. The
    session then leaves the keyless count for its key's (a full one refuses it)."""
    if not isinstance(body, dict) or body.get("type") != "session.config":
        error = InvalidRequest(
            "send the API key first: a session.config with 'api_key'", param="api_key"
        )
        error.code = "invalid_api_key"
        raise error
    key = body.get("api_key")
    owner = access.key_tenant(session.svc, key) if isinstance(key, str) else None
    if owner is None:
        await session.error("a valid API key is required", "invalid_api_key", "api_key")
        await session.ws.close(code=POLICY)
        return False
    sessions = access.sessions_of(session.ws)
    sessions.done_waiting(session)
    full = sessions.full(session.svc, owner)
    if full is not None:
        await session.refuse(full)
        return False
    session.owner, session.counted, session.key_by = owner, sessions.claim(owner), None
    return dispatch(session, body)


def text(session: Session, body: dict[str, object]) -> None:
    text = body.get("text")
    if not isinstance(text, str):
        raise InvalidRequest("input.text needs 'text', a string", param="text")
    limit = session.svc.settings.http.stream_buffer_chars
    if session.buffered() + len(text) > limit:
        error = InvalidRequest(
            f"this session holds {limit} characters not yet spoken "
            "already; this text is dropped: read the audio, then send "
            "more",
            param="text",
        )
        error.code = "buffer_full"
        raise error
    for segment in session.segmenter.feed(text):
        session.add(segment)
