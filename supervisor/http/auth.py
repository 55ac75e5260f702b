"""Bearer API keys. Only OPEN_PATHS and the console's assets are served without one.

On an open path the middleware still notes, in the scope (AUTHENTICATED_KEY), whether the
caller sent a valid key: `/health` shows its details (paths, pids, settings) only to such a
caller. More than one `Authorization` header is a 400 on every path: which one a proxy and this
server each read is not something to leave to chance.
"""

from __future__ import annotations

import hmac

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from supervisor.errors import InvalidRequest, ServerError, Unauthorized

# "/" and "/console" are the web console's page: it holds no data and asks for a key itself
OPEN_PATHS = frozenset({"/health", "/ready", "/", "/console"})
OPEN_PREFIX = "/console/"  # the console's script and style sheet
AUTHENTICATED_KEY = "omnivoice.authenticated"
FOREIGN_HOST = "omnivoice.foreign_host"  # set by EdgeChecks: a probe path under a Host not allowed


def is_open(path: str) -> bool:
    return path in OPEN_PATHS or path.startswith(OPEN_PREFIX)


class BearerAuth:
    """ASGI middleware: a request to a closed path needs `Authorization: Bearer <one of the keys>`."""

    def __init__(self, app: ASGIApp, keys: tuple[str, ...]) -> None:
        self.app = app
        self.keys = [key.encode() for key in keys]

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
        # Under a Host not allowed, the open paths show their open view, key or none.
        scope[AUTHENTICATED_KEY] = not scope.get(FOREIGN_HOST) and (
            not self.keys or self.valid(headers[0] if headers else b"")
        )
        if scope[AUTHENTICATED_KEY] or is_open(scope["path"]):
            await self.app(scope, receive, send)
            return
        error = Unauthorized(
            "a valid API key is required: send it as 'Authorization: Bearer <key>'"
        )
        await reply(error, scope, receive, send, {"WWW-Authenticate": "Bearer"})

    def valid(self, header: bytes) -> bool:
        scheme, _, token = header.partition(b" ")
        # compare_digest against every key, so the time taken does not tell which one nearly matched
        matches = [hmac.compare_digest(token.strip(), key) for key in self.keys]
        return scheme.lower() == b"bearer" and any(matches)


async def reply(error: ServerError, scope: Scope, receive: Receive, send: Send,
                headers: dict[str, str] | None = None) -> None:  # fmt: skip
    response = JSONResponse(error.to_body(), status_code=error.status,
                            headers={**error.headers(), **(headers or {})})  # fmt: skip
    await response(scope, receive, send)
