"""Request body limits per route, answered with an OpenAI-shaped 413.

Starlette's own `max_body_size` answers a declared Content-Length over the limit with a plain
text 413 whatever the handler renders, so the limit is kept here instead: the receive channel
of a limited route raises PayloadTooLarge as soon as the declared length, or the bytes read so
far, go over it, and the error handlers render it like any other error.
"""

from __future__ import annotations

import re

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from supervisor.errors import PayloadTooLarge


class BodyLimit:
    """ASGI middleware: `limits` holds (a route's path pattern, its method, the largest body it
    takes in bytes), as supervisor/http/route_table.py's `body_limits` makes them."""

    def __init__(self, app: ASGIApp, limits: list[tuple[re.Pattern[str], str, int]]) -> None:
        self.app = app
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        limit = self._limit(scope["method"], scope["path"]) if scope["type"] == "http" else None
        if limit is None:
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length", b"")
        received = 0

        async def limited() -> Message:
            nonlocal received
            if declared.isdigit() and int(declared) > limit:
                raise too_large(limit)
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise too_large(limit)
            return message

        await self.app(scope, limited, send)

    def _limit(self, method: str, path: str) -> int | None:
        return next(
            (n for pattern, m, n in self.limits if m == method and pattern.match(path)), None
        )


def too_large(limit: int) -> PayloadTooLarge:
    size = f"{limit / 2**20:.1f} MiB" if limit >= 2**20 else f"{limit // 1024} KiB"
    return PayloadTooLarge(f"the request body is larger than this route takes ({size})")
