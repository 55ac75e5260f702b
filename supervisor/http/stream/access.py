"""Who may open a WebSocket speech session, and how many are open.

The handshake names an allowed Host; on a server without keys, a browser's handshake must come
from this server's own pages (`Origin`, its port included, and `Sec-Fetch-Site`), since a page
elsewhere may open a WebSocket to a loopback server without asking anyone. The sessions open at
once are counted in all and per key once the key is known. A session opened without a key (a
browser sends it in its first message) is counted apart until it shows one, for
--stream-auth-s at most: as many again as --stream-sessions, the oldest closed to make room for
a new one, so sessions without a key never keep a key's session out.
"""

from __future__ import annotations

import hmac
from typing import Protocol

from starlette.websockets import WebSocket

from supervisor.http.edge import allowed_hosts, host_allowed
from supervisor.services import Services
from supervisor.tenants import OPEN, Tenant


class Keyless(Protocol):
    """A session without a key yet, as the count of them sees it."""

    def evict(self) -> None:
        """Close it: newer sessions without a key need its place."""


class Sessions:
    """The sessions open now: those with a key (or on an open server) in all and per key, and
    apart from them those that have not shown a key yet, oldest first."""

    def __init__(self) -> None:
        self.total = 0
        self.by_owner: dict[str, int] = {}
        self.keyless: dict[Keyless, None] = {}  # insertion-ordered: the oldest first

    def full(self, svc: Services, owner: Tenant) -> str | None:
        """Why one more session of `owner` is refused; None if it is not."""
        s = svc.settings.http
        if self.total >= s.stream_sessions:
            return f"this server holds {s.stream_sessions} speech sessions already"
        busy = owner is not OPEN and self.by_owner.get(owner.owner, 0)
        if busy and busy >= s.stream_sessions_per_key:
            return f"this key holds {s.stream_sessions_per_key} speech sessions already"
        return None

    def claim(self, owner: Tenant) -> str | None:
        """Count a session in all and against its key; the owner id to release it with."""
        self.total += 1
        if owner is OPEN:
            return ""
        self.by_owner[owner.owner] = self.by_owner.get(owner.owner, 0) + 1
        return owner.owner

    def release(self, owner: str | None) -> None:
        """Uncount a session `claim` counted (None: it never was)."""
        if owner is None:
            return
        self.total -= 1
        if owner:
            self.by_owner[owner] -= 1

    def wait(self, svc: Services, session: Keyless) -> None:
        """Count a session without a key; the oldest such is evicted past --stream-sessions."""
        while self.keyless and len(self.keyless) >= svc.settings.http.stream_sessions:
            oldest = next(iter(self.keyless))
            del self.keyless[oldest]
            oldest.evict()
        self.keyless[session] = None

    def done_waiting(self, session: Keyless) -> None:
        self.keyless.pop(session, None)


def sessions_of(ws: WebSocket) -> Sessions:
    state = ws.app.state
    if not hasattr(state, "speech_sessions"):
        state.speech_sessions = Sessions()
    found: Sessions = state.speech_sessions
    return found


def key_tenant(svc: Services, key: str) -> Tenant | None:
    """The tenant of a key; None if it names none (compared in constant time against each) or
    is no text UTF-8 can carry."""
    tenants = svc.settings.tenancy.by_key
    try:
        given = key.encode()
    except UnicodeEncodeError:  # a lone surrogate: no key's
        return None
    matches = [hmac.compare_digest(given, known.encode()) for known in tenants]
    return list(tenants.values())[matches.index(True)] if any(matches) else None


def handshake_error(ws: WebSocket, svc: Services) -> str | None:
    """Why the handshake is refused (Host, a browser on another site of an open server)."""
    host = ws.headers.get("host", "")
    if not host_allowed(host, allowed_hosts(svc.settings.http)):
        return "host not allowed"
    if svc.settings.tenancy.by_key:
        return None
    origin = ws.headers.get("origin")
    site = ws.headers.get("sec-fetch-site", "").lower()
    foreign = origin is not None and not same_origin(origin, host)
    return "a page on another site" if foreign or site in ("cross-site", "same-site") else None


def same_origin(origin: str, host: str) -> bool:
    """Whether a page of `origin` is one of this server's: its host and port are the Host
    header's (a scheme's default port written or not)."""
    scheme, _, authority = origin.lower().partition("://")
    default = {"http": ":80", "https": ":443", "ws": ":80", "wss": ":443"}.get(scheme)
    if not authority or default is None:
        return False
    return authority.removesuffix(default) == host.lower().removesuffix(default)
