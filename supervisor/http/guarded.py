"""The HTTP protocol every connection runs: read deadlines (read_deadlines.py), then the
connection caps and the send deadline of supervisor/http/connections.py.

The caps are checked in `connection_made`, the first moment a connection exists for the
server, in the protocol uvicorn builds for each one: uvicorn has no cap of its own that acts
before a request's headers are in (its `limit_concurrency` answers 503 only then), and a
half-sent request is what holds a descriptor. A WebSocket upgrade hands the transport to
uvicorn's WebSocket protocol; its end still releases the connection's place.

The send deadline: while uvicorn has paused writing (the transport holds more than its high
water mark the client has not taken), the connection is in the book's `waiting` and a timer
runs; when the client takes enough, the timer stops. If it fires, the connection is aborted:
its buffer is dropped at once, the handler's next send returns, and the bytes are free.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import Mapping
from typing import Any

import h11

from supervisor.errors import Unavailable
from supervisor.http.auth import TENANT
from supervisor.http.connections import ConnectionBook, peer_of
from supervisor.http.read_deadlines import ReadDeadlines
from supervisor.tenants import Tenant

log = logging.getLogger("omnivoice.http")

REFUSAL_RETRY_S = 1


@functools.cache
def refusal() -> bytes:
    """The whole answer to a connection past a cap: a 503, and the connection closes."""
    error = Unavailable(
        "the server holds as many connections as it takes, in all or from your address; "
        "retry shortly",
        retry_after_s=REFUSAL_RETRY_S,
    )
    error.code = "too_many_connections"
    body = json.dumps(error.to_body()).encode()
    head = (
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
        f"retry-after: {REFUSAL_RETRY_S}\r\ncontent-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode() + body


class Guarded(ReadDeadlines):
    book: ConnectionBook
    _peer: str | None = None  # set while the connection holds a place in the book
    _send_timer: asyncio.TimerHandle | None = None
    _upgraded = False  # handed to uvicorn's WebSocket protocol

    @staticmethod
    def guarding(base: type[ReadDeadlines], book: ConnectionBook) -> type[ReadDeadlines]:
        """`base` (read_deadlines.ReadDeadlines.configured) with the book's caps, for uvicorn."""
        return type("GuardedProtocol", (Guarded, base), {"book": book})

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        peer = peer_of(self.client)
        if not self.book.admit(peer, self):
            self._disarm()
            transport.write(refusal())
            transport.close()
            return
        self._peer = peer

    @property
    def receiving_request(self) -> bool:
        """Still reading a request, its headers or its body, with no answer begun (or idle
        between requests): what may be closed to make room for another address's."""
        if self._peer is None or self._upgraded:
            return False
        if self.conn.their_state is h11.IDLE:
            return self.conn.our_state is h11.IDLE
        started = self.cycle is not None and self.cycle.response_started
        return self.conn.their_state is h11.SEND_BODY and not started

    def evict(self) -> None:
        """Close this connection to make room (admit): it is told 503, as a refused one is."""
        self._release()
        self._disarm()
        self.transport.write(refusal())
        self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._release()
        super().connection_lost(exc)

    def handle_websocket_upgrade(self, event: h11.Request) -> None:
        super().handle_websocket_upgrade(event)
        protocol: Any = self.transport.get_protocol()
        if protocol is self or self._peer is None:
            return
        self._upgraded = True
        lost = protocol.connection_lost

        def connection_lost(exc: Exception | None) -> None:
            try:
                lost(exc)
            finally:
                self._release()

        protocol.connection_lost = connection_lost  # the WebSocket's end releases its place

    def pause_writing(self) -> None:
        super().pause_writing()
        scope: Mapping[str, object] = self.cycle.scope if self.cycle is not None else {}
        tenant = scope.get(TENANT)  # set by the auth middleware
        self.book.waiting[self] = tenant.owner if isinstance(tenant, Tenant) else None
        if self._send_timer is None:
            self._send_timer = self.loop.call_later(self.book.send_timeout_s, self._send_late)

    def resume_writing(self) -> None:
        super().resume_writing()
        self._stop_waiting()

    @property
    def unsent_bytes(self) -> int:
        return self.transport.get_write_buffer_size()

    def _send_late(self) -> None:
        self._send_timer = None
        client = f"{self.client[0]}:{self.client[1]}" if self.client else "a client"
        log.info(
            "dropping the connection from %s: it took none of its answer's %d pending bytes "
            "within %g s",
            client,
            self.unsent_bytes,
            self.book.send_timeout_s,
        )
        self._stop_waiting()
        self.transport.abort()

    def _stop_waiting(self) -> None:
        if self._send_timer is not None:
            self._send_timer.cancel()
            self._send_timer = None
        self.book.waiting.pop(self, None)

    def _release(self) -> None:
        self._stop_waiting()
        if self._peer is not None:
            self.book.release(self._peer, self)
            self._peer = None
