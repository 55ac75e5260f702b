"""A session's reader: the client's messages, each handled on its own (anything malformed gets
an `error` message and the session goes on), until the client goes, idles out or closes.

Idle: no message for --stream-idle-s, and nothing sent or being made meanwhile.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping
from typing import Any

from supervisor.errors import InvalidRequest, ServerError
from supervisor.http.stream import access
from supervisor.http.stream.config import configure
from supervisor.http.stream.session import POLICY, Session


async def read(session: Session) -> bool:
    """Messages until the client goes or idles out (False), or closes (True)."""
    idle_s = session.svc.settings.stream_idle_s or None
    while True:
        left = None if idle_s is None else session.active_at + idle_s - time.monotonic()
        try:
            message = await asyncio.wait_for(session.ws.receive(), left)
        except asyncio.TimeoutError:
            if not session.idle():
                session.active_at = time.monotonic()
            elif time.monotonic() - session.active_at >= (idle_s or 0):
                await session.error(f"nothing for {idle_s:g} s: the session is closed", "idle")
                await session.ws.close()
                return False
            continue
        session.active_at = time.monotonic()
        if message["type"] == "websocket.disconnect":
            return False
        verdict = await handle(session, message)
        if verdict is not None:
            return verdict


async def handle(session: Session, message: Mapping[str, Any]) -> bool | None:
    """One client frame; True once the client closes, False once the session is refused."""
    if message.get("text") is None:
        await session.error("send JSON text frames, not binary ones", "invalid_message")
        return None
    try:
        body = json.loads(message["text"])
    except ValueError:
        await session.error("this message is not valid JSON", "invalid_message")
        return None
    kind = body.get("type") if isinstance(body, dict) else None
    if session.owner is None:
        return await authenticate(session, body if kind == "session.config" else None)
    try:
        if kind == "session.config":
            configure(session, body)
        elif kind == "input.text":
            text(session, body)
        elif kind == "input.done":
            session.flush()
        elif kind == "session.close":
            session.flush(ending=False)
            session.queue(None)
            return True
        else:
            await session.error(
                f"unknown message type {kind!r}: send session.config, "
                "input.text, input.done or session.close",
                "invalid_message",
                "type",
            )
    except ServerError as exc:
        await session.error(exc.message, exc.code, exc.param)
    return None


async def authenticate(session: Session, config: dict[str, Any] | None) -> bool | None:
    """A key in the first session.config (a browser's way); a wrong one ends the session."""
    if config is None:
        await session.error(
            "send the API key first: a session.config with 'api_key'",
            "invalid_api_key",
            "api_key",
        )
        return None
    key = config.get("api_key")
    owner = access.key_tenant(session.svc, key) if isinstance(key, str) else None
    if owner is None:
        await session.error("a valid API key is required", "invalid_api_key", "api_key")
        await session.ws.close(code=POLICY)
        return False
    sessions = access.sessions_of(session.ws)
    full = sessions.full(session.svc, owner)
    if full is not None:
        await session.refuse(full)
        return False
    session.owner, session.counted = owner, sessions.claim(owner)
    return await handle(session, {"text": json.dumps(config)})


def text(session: Session, body: dict[str, Any]) -> None:
    text = body.get("text")
    if not isinstance(text, str):
        raise InvalidRequest("input.text needs 'text', a string", param="text")
    limit = session.svc.settings.stream_buffer_chars
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
