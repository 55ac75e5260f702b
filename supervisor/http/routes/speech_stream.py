"""`/v1/audio/speech/stream`: text in over a WebSocket, each sentence's audio out as it is made.

vLLM-Omni's protocol (message names kept, so its clients work). The client sends JSON text
frames: `session.config` (the speech request's fields but `input`, checked as a speech request
is; first, and again between utterances), `input.text` (text as it arrives), `input.done` (the
utterance ends: what is left is spoken; the session stays open) and `session.close`. The server
cuts the text into segments (`supervisor.speech.text.segmenter`), makes each as a speech request of
its own through the speech route's path (`speech.parse`, `steps.start`: the same checks,
limits, lexicons and voices), and sends, in order: `audio.start`, the segment's audio as binary
frames (a whole file in the session's format) as it is made, `audio.done` (with the segment's
words, when asked for); after an utterance's last segment, `session.done`. The ASR round trip
holds no audio unless the session asks (`hold_for_checks`, stream/config.py). Anything
malformed gets an `error` message naming its field and the session goes on; a config refused
leaves the session speaking nothing until a valid one comes.

A session is three tasks over one `Session` (supervisor/http/stream/): the reader takes the
client's messages, the producer makes the segments, the writer sends them in order.

Bounded: at most AHEAD segments are made ahead of the one being sent, so a client that does not
read holds the rest as text, and text past --stream-buffer-chars is refused (an `error`); the
sessions open at once, in all and per key; a session idle for --stream-idle-s is closed. A
client that goes away cancels its segments, queued or running. A sidecar that dies under a
segment costs that segment a retry (the scheduler runs the batch again), not the session.

Authentication (with API keys): the `Authorization: Bearer` header; or, for a browser, which
cannot set it, the key as `api_key` in the first `session.config`, before which nothing else is
accepted, within --stream-auth-s; such a session is counted apart until then (stream/access.py).
A server without keys takes no browser handshake from another page (`Origin`, its port too).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from starlette.websockets import WebSocket, WebSocketDisconnect

from supervisor.http.stream import access
from supervisor.http.stream.producer import produce
from supervisor.http.stream.reader import read
from supervisor.http.stream.session import POLICY, Session
from supervisor.http.stream.writer import write
from supervisor.services import Services
from supervisor.tenants import OPEN, Tenant

log = logging.getLogger("omnivoice.stream")


async def stream(ws: WebSocket) -> None:
    svc: Services = ws.app.state.services
    if access.handshake_error(ws, svc) is not None:
        await ws.close(code=POLICY)  # before accepting: an HTTP 403
        return
    owner: Tenant | None = OPEN if not svc.settings.tenancy.by_key else None
    header = ws.headers.get("authorization")
    if owner is None and header is not None:
        scheme, _, token = header.partition(" ")
        owner = access.key_tenant(svc, token.strip()) if scheme.lower() == "bearer" else None
        if owner is None:
            await ws.close(code=POLICY)
            return
    sessions = access.sessions_of(ws)
    await ws.accept()
    session = Session(ws, svc, owner)
    if owner is None:  # counted apart until it shows its key (reader.authenticate)
        sessions.wait(svc, session)
    else:
        full = sessions.full(svc, owner)
        if full is not None:
            await session.refuse(full)
            return
        session.counted = sessions.claim(owner)
    try:
        await run(session)
    finally:
        sessions.done_waiting(session)
        sessions.release(session.counted)


async def run(session: Session) -> None:
    """Until the client goes (what is queued for it is cancelled), idles out, or closes (what it
    asked for is sent first)."""
    reader = session.reader = asyncio.ensure_future(read(session))
    producer = asyncio.ensure_future(produce(session))
    writer = asyncio.ensure_future(write(session))
    tasks = [reader, producer, writer]
    try:
        await asyncio.wait([reader, writer], return_when=asyncio.FIRST_COMPLETED)
        if session.evicted:
            with contextlib.suppress(WebSocketDisconnect, OSError, RuntimeError):
                await session.refuse("newer sessions without a key took this one's place")
        closing = reader.done() and not reader.cancelled() and reader.exception() is None
        if closing and reader.result():  # session.close: the writer closes after the last
            await asyncio.wait([writer])
    finally:
        for task in [*tasks, *(m.task for m in session.made if m.task)]:
            task.cancel()
        for task in tasks:
            try:
                await task
            except (asyncio.CancelledError, WebSocketDisconnect, OSError, RuntimeError):
                pass  # the client went away mid-send, or the task was cancelled above
            except Exception:
                log.exception("a speech session failed")
