"""A streamed answer cut on purpose, logged as one line rather than as a crash.

A streamed answer whose later chunk fails (a chunk still failing its quality checks after every
retry, a sidecar lost) after its 200 and first bytes went out must not end as a normal stream
would: for `stream_format: "audio"` the connection is cut, so that a stream that ends normally
never holds failing audio (docs/API.md). The only way an ASGI application cuts a connection is
to return without completing its response, which uvicorn closes with a generic error line; an
exception instead gave two tracebacks (the handler's and Starlette's "response already
started"). Here the stream says what happened in one line of its own, and uvicorn's generic line
for that request is dropped (a context variable, set in the request's own task, marks it).
"""

from __future__ import annotations

import contextvars
import logging

from starlette.types import Scope

from supervisor.errors import ServerError

log = logging.getLogger("omnivoice.http")

UNFINISHED = "ASGI callable returned without completing response."  # uvicorn's line for it
_cut = contextvars.ContextVar("stream_cut", default=False)


class CutOnPurpose(logging.Filter):
    """On uvicorn's logger: drops its unfinished-response line for a stream cut here."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (_cut.get() and record.msg == UNFINISHED)


FILTER = CutOnPurpose()


def install() -> None:
    """Put the filter on uvicorn's error logger (once, however many apps are made)."""
    logging.getLogger("uvicorn.error").addFilter(FILTER)


def cut(scope: Scope, error: ServerError) -> None:
    """Say, in one line, that this request's stream is cut after it started, and why; the
    caller then returns without completing the response (uvicorn closes the connection)."""
    _cut.set(True)
    log.warning(
        "%s %s: stream cut after its first bytes: %s: %s",
        scope.get("method", ""),
        scope.get("path", ""),
        error.code,
        error.message,
    )
