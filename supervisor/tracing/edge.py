"""Every HTTP request's root span, its trace id in `X-Trace-Id` and in the access log line.

`TraceRequests` is ASGI middleware: it starts the request's root span (a child of the caller's
`traceparent` when tracing is on and one is sent), makes it current for everything the request
does, records `first_byte` (from the request's arrival to its first body bytes) and adds the
header to the answer's head. Off, the root is a non-recording span with a fresh trace id
(supervisor/tracing/spans.py), so the header is always there. A WebSocket segment's root is
`segment_task`'s: the route sends its trace id in `audio.done`. `log_trace_ids` adds
` trace_id=...` to uvicorn's access log lines, which are written in the request's context.
"""

from __future__ import annotations

import logging
import time
from asyncio import Task
from collections.abc import Coroutine
from typing import Any

from opentelemetry.trace import StatusCode
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from supervisor.tracing import spans

HEADER = b"x-trace-id"
ACCESS_LOGGER = "uvicorn.access"
TRACE_ID = "omnivoice.trace_id"  # the scope's key: the request's trace id, for late answers


def trace_header(scope: Scope) -> dict[str, str]:
    """`X-Trace-Id` for an answer made outside the middleware (an unexpected error's 500,
    rendered by Starlette's outermost handler after the request's span has ended)."""
    trace_id = scope.get(TRACE_ID)
    return {"X-Trace-Id": trace_id} if trace_id else {}


class TraceRequests:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.monotonic()
        method = scope["method"]
        root = spans.root(
            f"{method} {scope['path']}",
            attributes={"http.request.method": method, "url.path": scope["path"]},
            parent=remote_parent(scope),
            start_s=started,
        )
        scope[TRACE_ID] = spans.hex_trace_id(root)
        header = (HEADER, scope[TRACE_ID].encode())
        first = True

        async def send_traced(message: Message) -> None:
            nonlocal first
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                if not any(name.lower() == HEADER for name, _ in headers):
                    message = {**message, "headers": [*headers, header]}
                root.set_attribute("http.response.status_code", message["status"])
                if message["status"] >= 500:  # the server's failing, not the client's
                    root.set_status(StatusCode.ERROR)
            elif first and message["type"] == "http.response.body" and message.get("body"):
                first = False
                spans.record("first_byte", root, started, time.monotonic())
            await send(message)

        with spans.use(root, end=True):
            try:
                await self.app(scope, receive, send_traced)
            finally:
                route = scope.get("route")
                if root.is_recording() and route is not None:
                    root.update_name(f"{method} {getattr(route, 'path', scope['path'])}")
                    root.set_attribute("http.route", getattr(route, "path", scope["path"]))


def remote_parent(scope: Scope) -> spans.Context | None:
    """The caller's span from its `traceparent` header, when tracing is on and it sent one."""
    if not spans.enabled() or not any(name == b"traceparent" for name, _ in scope["headers"]):
        return None
    from opentelemetry.propagate import extract

    carrier = {name.decode("latin-1"): value.decode("latin-1") for name, value in scope["headers"]}
    return extract(carrier)


def segment_task(segment: Any, work: Coroutine[Any, Any, None]) -> tuple[Task[None], str]:
    """A WebSocket segment's making (`work`) as a trace of its own (`speech.segment`, ended
    with it), and the trace's id for its `audio.done`."""
    root = spans.root(
        "speech.segment",
        attributes={
            "omnivoice.utterance_index": segment.utterance,
            "omnivoice.sentence_index": segment.index,
        },
    )
    return spans.start_task(root, work), spans.hex_trace_id(root)


class TraceIdInLog(logging.Filter):
    """Adds the current trace id to a log line, as ` trace_id=<32 hex digits>`."""

    def filter(self, record: logging.LogRecord) -> bool:
        trace_id = spans.current_trace_id()
        if trace_id is not None and isinstance(record.args, tuple):
            record.msg = f"{record.msg} trace_id=%s"
            record.args = (*record.args, trace_id)
        return True


def log_trace_ids() -> None:
    """Put the trace id in uvicorn's access log lines (once)."""
    logger = logging.getLogger(ACCESS_LOGGER)
    if not any(isinstance(f, TraceIdInLog) for f in logger.filters):
        logger.addFilter(TraceIdInLog())
