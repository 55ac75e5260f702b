"""The web console: `GET /` and `GET /console` answer its page, `GET /console/{asset}` its script
and style sheet. All three come from the package (supervisor/http/console/), need no key (they hold
no data) and never change while the server runs; every data call the page makes carries a key."""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response

from supervisor.errors import NotFound

CONSOLE_DIR = Path(__file__).resolve().parents[1] / "console"
ASSET_PREFIX = "/console/"
MEDIA_TYPES = {
    "index.html": "text/html; charset=utf-8",
    "console.js": "text/javascript; charset=utf-8",
    "live.js": "text/javascript; charset=utf-8",
    "books.js": "text/javascript; charset=utf-8",
    "console.css": "text/css; charset=utf-8",
}
# The page loads nothing from elsewhere; the policy makes the browser hold it to that.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; media-src 'self' blob:; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-cache",
}


def _file(name: str) -> Response:
    return Response(
        (CONSOLE_DIR / name).read_bytes(), media_type=MEDIA_TYPES[name], headers=SECURITY_HEADERS
    )


async def page(request: Request) -> Response:
    return _file("index.html")


async def asset(request: Request) -> Response:
    name = request.path_params["asset"]
    if name not in MEDIA_TYPES or name == "index.html":
        raise NotFound(f"the console has no asset {name!r}")
    return _file(name)
