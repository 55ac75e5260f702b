"""Bearer API keys. Only the paths in OPEN_PATHS are served without one."""

from __future__ import annotations

import hmac

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from supervisor.errors import Unauthorized

OPEN_PATHS = frozenset({"/health", "/ready"})


class BearerAuth:
    """ASGI middleware: a request to a closed path needs `Authorization: Bearer <one of the keys>`."""

    def __init__(self, app: ASGIApp, keys: tuple[str, ...]) -> None:
        self.app = app
        self.keys = [key.encode() for key in keys]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.keys or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        header = dict(scope["headers"]).get(b"authorization", b"")
        scheme, _, token = header.partition(b" ")
        # compare_digest against every key, so the time taken does not tell which one nearly matched
        matches = [hmac.compare_digest(token.strip(), key) for key in self.keys]
        if scheme.lower() == b"bearer" and any(matches):
            await self.app(scope, receive, send)
            return
        error = Unauthorized("a valid API key is required: send it as 'Authorization: Bearer <key>'")
        await JSONResponse(error.to_body(), status_code=error.status, headers={"WWW-Authenticate": "Bearer"})(scope, receive, send)
