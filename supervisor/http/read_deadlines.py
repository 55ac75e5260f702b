"""uvicorn's h11 protocol with read deadlines, so slow clients cannot hold connections for ever.

uvicorn times out only an idle keep-alive connection. A client that sends its headers a byte at
a time, or announces a body and then stalls ("slow loris"), holds its connection and a file
descriptor for as long as it likes. Here:

- a request's headers must be complete within `header_timeout_s` of the connection opening (or
  of the previous response on a kept-alive connection), however the bytes trickle in;
- while its body is read, no gap between two reads may be longer than `body_timeout_s`.

Otherwise the connection is closed (a handler still reading the body sees a disconnect). The
body deadline waits while uvicorn itself has paused reading because the handler is slower than
the client.
"""

from __future__ import annotations

import asyncio
import logging

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger("omnivoice.http")


class ReadDeadlines(H11Protocol):
    header_timeout_s = 30.0
    body_timeout_s = 60.0
    _read_timer: asyncio.TimerHandle | None = None

    @staticmethod
    def configured(header_s: float, body_s: float) -> type[ReadDeadlines]:
        """This protocol with these deadlines, as uvicorn's `http` (one is built per connection)."""

        class Configured(ReadDeadlines):
            header_timeout_s = header_s
            body_timeout_s = body_s

        return Configured

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm(self.header_timeout_s, "its request headers")

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        state = self.conn.their_state
        if state is h11.SEND_BODY:
            # A gap between two reads of the body.
            self._arm(self.body_timeout_s, "the next part of its request body")
        elif state is not h11.IDLE:  # the request is in: the handler's time is its own
            self._disarm()
        # IDLE: headers still incomplete; their deadline stands, however many bytes trickle in

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._arm(self.header_timeout_s, "its next request's headers")

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self, delay_s: float, awaited: str) -> None:
        self._disarm()
        self._read_timer = self.loop.call_later(delay_s, self._expired, delay_s, awaited)

    def _disarm(self) -> None:
        if self._read_timer is not None:
            self._read_timer.cancel()
            self._read_timer = None

    def _expired(self, delay_s: float, awaited: str) -> None:
        self._read_timer = None
        if self.transport.is_closing():
            return
        if self.flow.read_paused:  # the handler is behind, not the client: wait for it
            self._arm(delay_s, awaited)
            return
        client = f"{self.client[0]}:{self.client[1]}" if self.client else "a client"
        log.info("closing the connection from %s: %s did not arrive within %g s",
                 client, awaited, delay_s)  # fmt: skip
        self.transport.close()
