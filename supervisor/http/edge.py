"""Checks on a request's head before anything reads it: the Host it names, and its framing.

- `Host` must be one of the allowed hosts (--allowed-hosts; by default the loopback names when
  the server listens on loopback, else any). A page on another site that rebinds its own name
  to 127.0.0.1 sends its own name as Host, so a keyless server on loopback stays closed to it.
  `/health` and `/ready` answer whatever the Host (a kubelet probe sends the pod's IP), but only
  with their open view: the details stay behind an allowed Host and a valid key.
- `Content-Length` together with `Transfer-Encoding` is a 400 and the connection is closed: the
  two frame the body differently, and a proxy in front may have read the other one (request
  smuggling). uvicorn's h11 alone reads the chunks and keeps the connection.
- A browser's request from another site (`Sec-Fetch-Site: cross-site` or `same-site`) that is
  not a GET or HEAD is a 403: a page elsewhere can post a form (multipart or urlencoded) to a
  server without keys on loopback without asking first, and the form routes take forms. The
  console is served by the server itself (same-origin), and clients that are not browsers do
  not send the header.
- The path and the query, once percent-decoded, must be UTF-8: uvicorn and Starlette would put
  U+FFFD for each bad byte, and a name or a cursor would be other text than the client sent.
  So must the headers the server reads, each sent once where one is read
  (supervisor/http/header_checks.py).
"""

from __future__ import annotations

from urllib.parse import unquote_to_bytes

from starlette.types import ASGIApp, Receive, Scope, Send

from supervisor.errors import InvalidRequest
from supervisor.http.auth import FOREIGN_HOST, reply
from supervisor.http.header_checks import header_error
from supervisor.settings import HttpSettings, is_loopback

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
PROBE_PATHS = frozenset({"/health", "/ready"})


def allowed_hosts(settings: HttpSettings) -> tuple[str, ...]:
    """The hosts this server answers to: the setting, else what its listening address implies."""
    if settings.allowed_hosts:
        return tuple(host.lower() for host in settings.allowed_hosts)
    return LOOPBACK_NAMES if is_loopback(settings.host) else ("*",)


def host_allowed(host: str, allowed: tuple[str, ...]) -> bool:
    """Whether a Host header value matches an entry: `*`, `name:port` exactly, `*.domain` for
    its subdomains, or a name (or IP) with any port."""
    host = host.lower()
    if host.startswith("["):  # an IPv6 address: nothing after it but a port
        end = host.find("]") + 1
        rest = host[end:]
        if end == 0 or (rest and not (rest[0] == ":" and rest[1:].isdigit())):
            return False
        name = host[:end]
    else:
        before, _, port = host.rpartition(":")
        name = before if before and port.isdigit() else host
    name = name.rstrip(".")
    for entry in allowed:
        if entry in ("*", host, name):
            return True
        if entry.startswith("*.") and name.endswith(entry[1:]):
            return True
    return False


def valid_utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


class EdgeChecks:
    """ASGI middleware: refuse a body framed two ways, a path or query that is not UTF-8, a Host
    not allowed and a browser's cross-site request that would change something, before auth."""

    def __init__(self, app: ASGIApp, allowed: tuple[str, ...]) -> None:
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        framing = framing_error(scope)
        if framing is not None:
            await reply(framing, scope, receive, send, {"Connection": "close"})
            return
        error = (
            text_error(scope)
            or header_error(scope)
            or self.host_error(scope)
            or cross_site_error(scope)
        )
        if error is not None:
            await reply(error, scope, receive, send)
            return
        await self.app(scope, receive, send)

    def host_error(self, scope: Scope) -> InvalidRequest | None:
        """A 400 for a Host not allowed; a probe path passes, marked to show its open view."""
        hosts = [value for name, value in scope["headers"] if name == b"host"]
        host = hosts[0].decode("latin-1") if len(hosts) == 1 else ""
        if host_allowed(host, self.allowed):
            return None
        if scope["path"] in PROBE_PATHS:
            scope[FOREIGN_HOST] = True
            return None
        error = InvalidRequest(
            f"this server does not answer to the Host {host!r}: call it by one of "
            f"{', '.join(self.allowed)}, or add the name to --allowed-hosts",
            param="Host",
        )
        error.code = "host_not_allowed"
        return error


class CrossSite(InvalidRequest):
    status = 403
    code = "cross_site_request"


def cross_site_error(scope: Scope) -> InvalidRequest | None:
    if scope["method"] in ("GET", "HEAD"):  # a link to the console from elsewhere still opens it
        return None
    sites = [value for name, value in scope["headers"] if name == b"sec-fetch-site"]
    if not any(site.strip().lower() in (b"cross-site", b"same-site") for site in sites):
        return None
    return CrossSite(
        "a browser page on another site cannot send this request (Sec-Fetch-Site); use the "
        "console this server serves, or a client that is not a browser",
        param="Sec-Fetch-Site",
    )


def framing_error(scope: Scope) -> InvalidRequest | None:
    names = [name for name, _ in scope["headers"]]
    if b"content-length" in names and b"transfer-encoding" in names:
        return InvalidRequest(
            "send Content-Length or Transfer-Encoding, not both: the body's length is "
            "ambiguous, and the connection is closed",
            param="Transfer-Encoding",
        )
    return None


def text_error(scope: Scope) -> InvalidRequest | None:
    for part, raw in (("path", scope.get("raw_path") or b""), ("query", scope["query_string"])):
        if not valid_utf8(unquote_to_bytes(raw.replace(b"+", b" "))):
            error = InvalidRequest(
                f"the request's {part} is not valid UTF-8 once decoded", param=part
            )
            error.code = "invalid_text"
            return error
    return None
