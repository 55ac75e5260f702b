"""supervisor/tracing/edge.py under uvicorn on a real socket, with the app's own error rendering:
one `X-Trace-Id` on every answer (an unexpected error's 500 too, rendered outside the
middleware), the same id in the access log line, and none twice."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from supervisor.errors import InvalidRequest, ServerError
from supervisor.http.app import render_error
from supervisor.tracing.edge import TraceRequests, log_trace_ids
from tests.helpers.ports import free_port
from tests.helpers.waits import wait_until


async def fine(request: Request) -> PlainTextResponse:
    return PlainTextResponse("fine")


async def refused(request: Request) -> PlainTextResponse:
    raise InvalidRequest("no", param="x")


async def broken(request: Request) -> PlainTextResponse:
    raise RuntimeError("a bug")


@contextlib.contextmanager
def serving() -> Iterator[str]:
    app = Starlette(
        routes=[Route("/fine", fine), Route("/refused", refused), Route("/broken", broken)],
        middleware=[Middleware(TraceRequests)],
        exception_handlers={ServerError: render_error, Exception: render_error},
    )
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, port=port, log_config=None, lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_until(lambda: server.started or not thread.is_alive(), 30, "the server to start")
    assert thread.is_alive(), "the server stopped while starting"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


def test_every_answer_names_its_trace_once(caplog: pytest.LogCaptureFixture) -> None:
    log_trace_ids()
    with caplog.at_level(logging.INFO, logger="uvicorn.access"), serving() as url:
        replies = {path: httpx.get(url + path) for path in ("/fine", "/refused", "/broken")}
    assert [r.status_code for r in replies.values()] == [200, 400, 500]
    for reply in replies.values():
        (trace_id,) = reply.headers.get_list("x-trace-id")
        assert len(trace_id) == 32 and int(trace_id, 16)
    lines = [r.getMessage() for r in caplog.records if r.name == "uvicorn.access"]
    fine_id = replies["/fine"].headers["x-trace-id"]
    assert any(line.endswith(f'"GET /fine HTTP/1.1" 200 trace_id={fine_id}') for line in lines)
