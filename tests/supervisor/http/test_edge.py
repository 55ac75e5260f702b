"""supervisor/http/edge.py: the Host a request names, its framing, its text and a browser's
cross-site writes, refused before anything reads the request (a live server's whole edge:
tests/integration/test_edge.py)."""

from __future__ import annotations

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from supervisor.http.auth import FOREIGN_HOST
from supervisor.http.edge import LOOPBACK_NAMES, EdgeChecks, allowed_hosts, host_allowed
from supervisor.settings import Settings


async def seen(request: Request) -> JSONResponse:
    return JSONResponse({"foreign": request.scope.get(FOREIGN_HOST, False)})


def client(allowed: tuple[str, ...] = LOOPBACK_NAMES, base: str = "http://localhost") -> TestClient:
    app = Starlette(routes=[Route(p, seen, methods=["GET", "POST"]) for p in ("/x", "/health")])
    return TestClient(EdgeChecks(app, allowed), base_url=base)


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("localhost:9194", ("localhost",)),
        ("LOCALHOST", ("localhost",)),
        ("localhost.", ("localhost",)),
        ("[::1]:9194", ("[::1]",)),
        ("api.example.com:443", ("*.example.com",)),
        ("tts.example.com:8080", ("tts.example.com:8080",)),
        ("anything", ("*",)),
    ],
)
def test_hosts_that_match(host: str, allowed: tuple[str, ...]) -> None:
    assert host_allowed(host, allowed)


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("evil.example", LOOPBACK_NAMES),
        ("localhost.evil.example", ("localhost",)),
        ("example.com", ("*.example.com",)),  # the domain itself is not its subdomain
        ("tts.example.com:9090", ("tts.example.com:8080",)),
        ("", LOOPBACK_NAMES),
    ],
)
def test_hosts_that_do_not(host: str, allowed: tuple[str, ...]) -> None:
    assert not host_allowed(host, allowed)


def test_the_allowed_hosts_follow_the_listening_address() -> None:
    assert allowed_hosts(Settings(engine="null", host="127.0.0.1").http) == LOOPBACK_NAMES
    assert allowed_hosts(Settings(engine="null", host="0.0.0.0").http) == ("*",)
    given = Settings(engine="null", host="127.0.0.1", allowed_hosts=("TTS.example.com",))
    assert allowed_hosts(given.http) == ("tts.example.com",)


def test_a_host_not_allowed_is_a_400_but_a_probe_shows_its_open_view() -> None:
    c = client(base="http://evil.example")
    refused = c.get("/x")
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == "host_not_allowed"
    assert refused.json()["error"]["param"] == "Host"
    assert c.get("/health").json() == {"foreign": True}
    assert client().get("/health").json() == {"foreign": False}


def test_a_body_framed_two_ways_is_a_400_that_closes_the_connection() -> None:
    headers = {"Content-Length": "3", "Transfer-Encoding": "chunked"}
    refused = client().post("/x", content=b"abc", headers=headers)
    assert refused.status_code == 400
    assert refused.headers["Connection"] == "close"
    assert refused.json()["error"]["param"] == "Transfer-Encoding"


@pytest.mark.parametrize(("path", "part"), [("/x%ff", "path"), ("/x?name=%C3%28", "query")])
def test_a_path_or_query_not_utf8_once_decoded_is_a_400(path: str, part: str) -> None:
    refused = client().get(path)
    assert refused.status_code == 400
    assert refused.json()["error"] | {"message": None} == {
        "message": None,
        "type": "invalid_request_error",
        "param": part,
        "code": "invalid_text",
    }
    assert client().get("/x?name=%C3%A9").status_code == 200


@pytest.mark.parametrize("site", ["cross-site", "same-site", " Cross-Site "])
def test_a_browsers_write_from_another_site_is_a_403(site: str) -> None:
    c = client()
    refused = c.post("/x", headers={"Sec-Fetch-Site": site})
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "cross_site_request"
    assert c.get("/x", headers={"Sec-Fetch-Site": site}).status_code == 200  # a link still opens


@pytest.mark.parametrize("site", ["same-origin", "none"])
def test_a_write_from_the_same_origin_or_no_page_passes(site: str) -> None:
    assert client().post("/x", headers={"Sec-Fetch-Site": site}).status_code == 200
