"""Who may open a WebSocket speech session, and how many are open.

The handshake names an allowed Host; on a server without keys, a browser's handshake must come
from this server's own pages (`Origin`, `Sec-Fetch-Site`), since a page elsewhere may open a
WebSocket to a loopback server without asking anyone. The sessions open at once are counted in
all, and per key once the key is known.
"""

from __future__ import annotations

import hmac

from starlette.websockets import WebSocket

from supervisor.http.edge import allowed_hosts, host_allowed
from supervisor.services import Services
from supervisor.tenants import OPEN, Tenant


class Sessions:
    """The sessions open now, in all and per key (an open server's are counted in all only)."""

    def __init__(self) -> None:
        self.total = 0
        self.by_owner: dict[str, int] = {}

    def full(self, svc: Services, owner: Tenant | None) -> str | None:
        """Why one more session (of `owner`, once known) is refused; None if it is not."""
        s = svc.settings
        if owner is None and self.total >= s.stream_sessions:
            return f"this server holds {s.stream_sessions} speech sessions already"
        busy = owner is not None and owner is not OPEN and self.by_owner.get(owner.owner, 0)
        if busy and busy >= s.stream_sessions_per_key:
            return f"this key holds {s.stream_sessions_per_key} speech sessions already"
        return None

    def claim(self, owner: Tenant) -> str | None:
        """Count a session against its key; the owner id to release it with."""
        if owner is OPEN:
            return None
        self.by_owner[owner.owner] = self.by_owner.get(owner.owner, 0) + 1
        return owner.owner

    def release(self, owner: str | None) -> None:
        if owner is not None:
            self.by_owner[owner] -= 1


def sessions_of(ws: WebSocket) -> Sessions:
    state = ws.app.state
    if not hasattr(state, "speech_sessions"):
        state.speech_sessions = Sessions()
    found: Sessions = state.speech_sessions
    return found


def key_tenant(svc: Services, key: str) -> Tenant | None:
    """The tenant of a key; None if it names none (compared in constant time against each)."""
    tenants = svc.settings.tenancy.by_key
    matches = [hmac.compare_digest(key.encode(), known.encode()) for known in tenants]
    return list(tenants.values())[matches.index(True)] if any(matches) else None


def handshake_error(ws: WebSocket, svc: Services) -> str | None:
    """Why the handshake is refused (Host, a browser on another site of an open server)."""
    if not host_allowed(ws.headers.get("host", ""), allowed_hosts(svc.settings)):
        return "host not allowed"
    if svc.settings.tenancy.by_key:
        return None
    origin = ws.headers.get("origin")
    site = ws.headers.get("sec-fetch-site", "").lower()
    foreign = origin is not None and not host_allowed(
        origin.partition("://")[2], allowed_hosts(svc.settings)
    )
    return "a page on another site" if foreign or site in ("cross-site", "same-site") else None
