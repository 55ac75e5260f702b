"""A free TCP port on the loopback, for a server a test starts (it may be taken again before the
server binds it: `live_server.live` starts again on another)."""

from __future__ import annotations

import socket


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
