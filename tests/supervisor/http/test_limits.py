"""supervisor/http/limits.py: a limited route's body is refused with a 413 as soon as its declared
length, or what has been read, goes over the limit; other routes and methods are not limited."""

from __future__ import annotations

import re
from collections.abc import Iterator

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from supervisor.errors import ServerError
from supervisor.http.limits import BodyLimit, too_large

LIMIT = 1000


async def length(request: Request) -> JSONResponse:
    return JSONResponse({"read": len(await request.body())})


async def rendered(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ServerError)
    return JSONResponse(exc.to_body(), status_code=exc.status)


def client() -> TestClient:
    app = Starlette(
        routes=[
            Route("/small", length, methods=["POST", "PUT"]),
            Route("/free", length, methods=["POST"]),
        ],
        exception_handlers={ServerError: rendered},
    )
    limits = [(re.compile(r"/small$"), "POST", LIMIT)]
    return TestClient(BodyLimit(app, limits))


def chunks(size: int, count: int) -> Iterator[bytes]:
    for _ in range(count):
        yield b"x" * size


def test_a_body_within_the_limit_is_read_whole() -> None:
    assert client().post("/small", content=b"x" * LIMIT).json() == {"read": LIMIT}


def test_a_declared_length_over_the_limit_is_a_413() -> None:
    refused = client().post("/small", content=b"x" * (LIMIT + 1))
    assert refused.status_code == 413
    assert refused.json()["error"]["message"].endswith("(0 KiB)")


def test_a_chunked_body_is_cut_once_what_was_read_goes_over() -> None:
    refused = client().post("/small", content=chunks(400, 3))  # no Content-Length
    assert refused.status_code == 413
    assert client().post("/small", content=chunks(400, 2)).json() == {"read": 800}


def test_other_routes_and_methods_are_not_limited() -> None:
    c = client()
    assert c.post("/free", content=b"x" * 5000).json() == {"read": 5000}
    assert c.put("/small", content=b"x" * 5000).json() == {"read": 5000}


def test_the_message_names_the_limit_in_kib_or_mib() -> None:
    assert "(64 KiB)" in too_large(64 * 1024).message
    assert "(1.5 MiB)" in too_large(3 * 2**19).message
    assert too_large(1).status == 413
