"""`serve`'s address checked before anything starts: a port in use is one line, not uvicorn's
`[Errno 98]` after a sidecar has started.

The probe binds as uvicorn will (SO_REUSEADDR, every address the host resolves to) and lets go
at once. Another process may still take the port in between; uvicorn then says so as before.
"""

from __future__ import annotations

import errno
import socket


def port_problem(host: str, port: int) -> str | None:
    """What keeps `serve` from listening on host:port, in one line with what to do, or None."""
    if port == 0:  # any free port: nothing to check
        return None
    try:
        addresses = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as exc:
        return (
            f"--host {host!r} cannot be resolved ({exc.strerror}); give an address of this machine"
        )
    for family, kind, proto, _, address in addresses:
        with socket.socket(family, kind, proto) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:  # as asyncio binds it: v6 only, v4 on its own socket
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(address)
            except OSError as exc:
                return _say(host, port, exc)
    return None


def _say(host: str, port: int, exc: OSError) -> str:
    where = f"{host}:{port}"
    if exc.errno == errno.EADDRINUSE:
        return (
            f"port {port} is in use on {host} (another server?): stop it "
            f"(omnivoice-supervisor stop --port {port}) or give another --port"
        )
    if exc.errno == errno.EACCES:
        return f"not allowed to listen on {where} (ports below 1024 need privileges): give --port 1024 or above"
    if exc.errno == errno.EADDRNOTAVAIL:
        return f"--host {host} is not an address of this machine; give one (0.0.0.0: all of them)"
    return f"cannot listen on {where}: {exc.strerror or exc}"
