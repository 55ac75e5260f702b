"""supervisor/http/read_deadlines.py: uvicorn with these deadlines, on a real socket. The header
deadline and a body's gap are cut on a live server in tests/integration/test_hardening.py; here,
the whole body's deadline, the header deadline again on a kept-alive connection, and a handler's
own time, which no deadline cuts."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from supervisor.http.read_deadlines import ReadDeadlines
from tests.helpers.ports import free_port
from tests.helpers.waits import wait_until

HEADER_S, GAP_S, BODY_S = 0.5, 0.5, 1.0
HANDLER_S = 1.5  # longer than every deadline


async def echo(request: Request) -> PlainTextResponse:
    return PlainTextResponse(f"read {len(await request.body())}")


async def slow(request: Request) -> PlainTextResponse:
    await request.body()
    await asyncio.sleep(HANDLER_S)  # the handler's own time: what is under test
    return PlainTextResponse("done")


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    app = Starlette(
        routes=[Route("/echo", echo, methods=["POST"]), Route("/slow", slow, methods=["POST"])]
    )
    chosen = free_port()
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=chosen,
        http=ReadDeadlines.configured(HEADER_S, GAP_S, BODY_S),
        log_level="warning",
        lifespan="off",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_until(lambda: server.started, 30, "uvicorn to listen")
    yield chosen
    server.should_exit = True
    thread.join(10)


@contextlib.contextmanager
def connection(port: int) -> Iterator[socket.socket]:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.settimeout(10)
        yield sock


def head(path: str, length: int) -> bytes:
    return f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {length}\r\n\r\n".encode()


def read_until(sock: socket.socket, end: bytes) -> bytes:
    answer = b""
    while not answer.endswith(end) and (chunk := sock.recv(4096)):
        answer += chunk
    return answer


def read_all(sock: socket.socket) -> bytes:
    answer = b""
    while chunk := sock.recv(4096):
        answer += chunk
    return answer


def test_a_body_that_trickles_without_a_gap_is_cut_at_its_whole_deadline(port: int) -> None:
    with connection(port) as sock:
        sock.sendall(head("/echo", 1000))
        start = time.monotonic()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            for _ in range(
                40
            ):  # a byte every 0.1 s: never a gap, never done (the pacing is the test)
                sock.sendall(b"x")
                time.sleep(0.1)
                if time.monotonic() - start > BODY_S + 1:
                    break
        answer = read_all(sock)
    assert answer.startswith(b"HTTP/1.1 408 "), answer
    assert b"request_body_timeout" in answer and b"its whole request body" in answer


def test_a_kept_alive_connection_gets_a_new_header_deadline(port: int) -> None:
    with connection(port) as sock:
        sock.sendall(head("/echo", 3) + b"abc")
        first = read_until(sock, b"read 3")
        assert first.startswith(b"HTTP/1.1 200 ") and first.endswith(b"read 3"), first
        start = time.monotonic()
        assert read_all(sock) == b""  # idle after the answer: closed, with nothing said
        assert time.monotonic() - start < HEADER_S + 2


def test_the_handlers_own_time_is_not_cut(port: int) -> None:
    with connection(port) as sock:
        sock.sendall(head("/slow", 2) + b"ab")
        answer = read_until(sock, b"done")
    assert answer.startswith(b"HTTP/1.1 200 ") and answer.endswith(b"done"), answer
