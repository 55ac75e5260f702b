"""Bearer API keys. Only the open routes of supervisor/http/route_table.py are served without one
(the probes and the web console, whose page holds no data and asks for a key itself).

A valid key's tenant (supervisor.tenants: its owner id, whether it is an admin) goes into the
scope (TENANT) for the routes to scope what they show; on a server without keys every request
is tenants.OPEN. On an open path the middleware still notes, in the scope (AUTHENTICATED_KEY),
whether the caller sent a valid key: `/health` shows its details (paths, pids, settings) only to such a
caller. More than one `Authorization` header is a 400 on every path: which one a proxy and this
server each read is not something to leave to chance.
"""

from __future__ import annotations

import hmac
import re

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from supervisor.errors import InvalidRequest, ServerError, Unauthorized
from supervisor.tenants import OPEN, Tenancy, Tenant

AUTHENTICATED_KEY = "omnivoice.authenticated"
FOREIGN_HOST = "omnivoice.foreign_host"  # set by EdgeChecks: a probe path under a Host not allowed
TENANT = "omnivoice.tenant"


class BearerAuth:
    """ASGI middleware: a request to a closed path needs `Authorization: Bearer <one of the keys>`."""

    def __init__(self, app: ASGIApp, tenancy: Tenancy, open_paths: list[re.Pattern[str]]) -> None:
        self.app = app
        self.open_paths = open_paths  # whatever the method: a wrong one is told 405, not 401
        self.tenants = [(key.encode(), one) for key, one in tenancy.by_key.items()]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = [value for name, value in scope["headers"] if name == b"authorization"]
        if len(headers) > 1:
            duplicate = InvalidRequest(
                "send one Authorization header, not several", param="Authorization"
            )
            await reply(duplicate, scope, receive, send)
            return
        found = OPEN if not self.tenants else self.tenant(headers[0] if headers else b"")
        if scope.get(FOREIGN_HOST):  # the open paths show their open view, key or none
            found = None
        scope[AUTHENTICATED_KEY] = found is not None
        scope[TENANT] = found
        if found is not None or any(p.match(scope["path"]) for p in self.open_paths):
            await self.app(scope, receive, send)
            return
        error = Unauthorized(
            "a valid API key is required: send it as 'Authorization: Bearer <key>'"
        )
        await reply(error, scope, receive, send, {"WWW-Authenticate": "Bearer"})

    def tenant(self, header: bytes) -> Tenant | None:
        """The tenant of the header's key; None if it names none."""
        scheme, _, token = header.partition(b" ")
        # compare_digest against every key, so the time taken does not tell which one nearly matched
        matches = [hmac.compare_digest(token.strip(), key) for key, _ in self.tenants]
        if scheme.lower() != b"bearer" or not any(matches):
            return None
        return self.tenants[matches.index(True)][1]


def tenant(request: Request) -> Tenant:
    """The tenant a request on a closed path is made for (the middleware let it in)."""
    found: Tenant | None = request.scope.get(TENANT)
    if found is None:  # an open path, without a key: it shows nobody's things
        raise Unauthorized("a valid API key is required: send it as 'Authorization: Bearer <key>'")
    return found


async def reply(
    error: ServerError,
    scope: Scope,
    receive: Receive,
    send: Send,
    headers: dict[str, str] | None = None,
) -> None:
    response = JSONResponse(
        error.to_body(), status_code=error.status, headers={**error.headers(), **(headers or {})}
    )
    await response(scope, receive, send)
