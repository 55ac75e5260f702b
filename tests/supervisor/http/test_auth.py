"""supervisor/http/auth.py: which requests BearerAuth lets through, what it notes in the scope,
and its 400 and 401s (the whole server's keys and tenants: tests/integration/test_tenancy.py)."""

from __future__ import annotations

import re

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient
from starlette.types import Receive, Scope, Send

from supervisor.errors import Unauthorized
from supervisor.http.auth import AUTHENTICATED_KEY, FOREIGN_HOST, TENANT, BearerAuth, tenant
from supervisor.tenants import OPEN, KeyFile, Tenancy

KEY, OTHER = "sk-one", "sk-two"


async def seen(request: Request) -> JSONResponse:
    found = request.scope[TENANT]
    return JSONResponse(
        {
            "owner": found.owner if found else None,
            "authenticated": request.scope[AUTHENTICATED_KEY],
        }
    )


async def scoped(request: Request) -> JSONResponse:
    try:
        return JSONResponse({"owner": tenant(request).owner})
    except Unauthorized as exc:
        return JSONResponse(exc.to_body(), status_code=exc.status)


class ForeignHost:
    """Marks every request as EdgeChecks marks a probe under a Host not allowed."""

    def __init__(self, app: BearerAuth) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope[FOREIGN_HOST] = True
        await self.app(scope, receive, send)


def client(keys: tuple[str, ...], foreign: bool = False) -> TestClient:
    routes = [Route("/open", seen), Route("/closed", seen), Route("/scoped", scoped)]
    guarded = BearerAuth(
        Starlette(routes=routes), Tenancy.of(keys, KeyFile()), [re.compile(r"/open$")]
    )
    return TestClient(ForeignHost(guarded) if foreign else guarded)


def test_a_closed_path_needs_one_of_the_keys() -> None:
    c = client((KEY, OTHER))
    missing = c.get("/closed")
    assert missing.status_code == 401
    assert missing.headers["WWW-Authenticate"] == "Bearer"
    assert missing.json()["error"]["code"] == "invalid_api_key"
    assert c.get("/closed", headers={"Authorization": "Bearer sk-nope"}).status_code == 401
    assert c.get("/closed", headers={"Authorization": f"Basic {KEY}"}).status_code == 401
    one = c.get("/closed", headers={"Authorization": f"Bearer {KEY}"}).json()
    two = c.get("/closed", headers={"Authorization": f"bearer {OTHER}"}).json()
    assert one["authenticated"] and two["authenticated"]
    assert one["owner"] != two["owner"]  # each key its own tenant


def test_an_open_path_answers_anyone_and_notes_whether_the_key_was_valid() -> None:
    c = client((KEY,))
    assert c.get("/open").json() == {"owner": None, "authenticated": False}
    with_key = c.get("/open", headers={"Authorization": f"Bearer {KEY}"}).json()
    assert with_key["authenticated"] and with_key["owner"]


def test_an_open_path_without_a_key_shows_no_tenant() -> None:
    refused = client((KEY,)).get("/open/../scoped")  # not matched: still closed
    assert refused.status_code == 401
    c = TestClient(
        BearerAuth(
            Starlette(routes=[Route("/scoped", scoped)]),
            Tenancy.of((KEY,), KeyFile()),
            [re.compile(r"/scoped$")],
        )
    )
    assert c.get("/scoped").status_code == 401  # the route asked for a tenant: there is none
    assert c.get("/scoped", headers={"Authorization": f"Bearer {KEY}"}).status_code == 200


def test_without_keys_everyone_is_the_open_tenant() -> None:
    c = client(())
    assert c.get("/closed").json() == {"owner": OPEN.owner, "authenticated": True}


@pytest.mark.parametrize("path", ["/open", "/closed"])
def test_two_authorization_headers_are_a_400_on_every_path(path: str) -> None:
    headers = [("Authorization", f"Bearer {KEY}"), ("Authorization", f"Bearer {OTHER}")]
    answer = client((KEY, OTHER)).get(path, headers=headers)
    assert answer.status_code == 400
    assert answer.json()["error"]["param"] == "Authorization"


def test_a_foreign_host_sees_the_open_view_even_with_a_key() -> None:
    c = client((KEY,), foreign=True)
    shown = c.get("/open", headers={"Authorization": f"Bearer {KEY}"}).json()
    assert shown == {"owner": None, "authenticated": False}
    assert c.get("/closed", headers={"Authorization": f"Bearer {KEY}"}).status_code == 401
