"""The `--callback-allow` entries read: a host and a port a job's callback may go to.

An entry is `HOST` (that host on the scheme's default port only: 80 for http, 443 for https),
`HOST:PORT` (that port, either scheme) or `HOST:*` (any port); hosts are names or IP literals
(`[::1]` for IPv6), compared without case. The settings check every entry when they are made
(rules.py); supervisor/jobs/callbacks.py checks a job's callback URL against them.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import httpx

DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class Allowed:
    """One `--callback-allow` entry: a host, and its port (None: the scheme's default only)."""

    host: str
    port: int | None
    any_port: bool = False

    def admits(self, host: str, port: int, scheme: str) -> bool:
        if host != self.host:
            return False
        return self.any_port or port == (DEFAULT_PORTS[scheme] if self.port is None else self.port)


def allowed_entry(entry: str) -> Allowed:
    """An allow-list entry read; ValueError saying why it cannot be one."""
    text = entry.strip()
    any_port = text.endswith(":*")
    hostport = text[:-2] if any_port else text
    try:
        # A scheme without a default port, so that an explicit :80 stays explicit.
        url = httpx.URL(f"x-allow://{hostport}/")
    except httpx.InvalidURL as exc:
        raise ValueError(f"{entry!r} is not HOST, HOST:PORT or HOST:*: {exc}") from None
    if not url.raw_host or url.userinfo or url.path != "/" or url.query or url.fragment:
        raise ValueError(f"{entry!r} is not HOST, HOST:PORT or HOST:* (HOST a name or IP)")
    if any_port and url.port is not None:
        raise ValueError(f"{entry!r} names a port and '*'")
    if url.port is not None and not 0 < url.port < 65536:
        raise ValueError(f"{entry!r} has a port out of range")
    return Allowed(url.raw_host.decode("ascii").lower(), url.port, any_port)


@functools.lru_cache(maxsize=8)
def allowed_entries(allow: tuple[str, ...]) -> tuple[Allowed, ...]:
    return tuple(allowed_entry(entry) for entry in allow)
