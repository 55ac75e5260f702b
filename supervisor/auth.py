"""Bearer API keys. Only OPEN_PATHS and the console's assets are served without one."""

from __future__ import annotations

import hmac

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from supervisor.errors import Unauthorized

# "/" and "/console" are the web console's page: it holds no data and asks for a key itself
OPEN_PATHS = frozenset({"/health", "/ready", "/", "/console"})
OPEN_PREFIX = "/console/"  # the console's script and style sheet


def is_open(path: str) -> bool:
    return path in OPEN_PATHS or path.startswith(OPEN_PREFIX)


class BearerAuth:
    """ASGI middleware: a request to a closed path needs `Authorization: Bearer <one of the keys>`."""

    def __init__(self, app: ASGIApp, keys: tuple[str, ...]) -> None:
        self.app = app
        self.keys = [key.encode() for key in keys]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.keys or is_open(scope["path"]):
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
