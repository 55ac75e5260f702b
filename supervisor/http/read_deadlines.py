"""uvicorn's h11 protocol with read deadlines, so slow clients cannot hold connections for ever.

uvicorn times out only an idle keep-alive connection. A client that sends its headers a byte at
a time, or announces a body and then stalls ("slow loris"), holds its connection and a file
descriptor for as long as it likes. Here:

- a request's headers must be complete within `header_timeout_s` of the connection opening (or
  of the previous response on a kept-alive connection), however the bytes trickle in;
- while its body is read, no gap between two reads may be longer than `body_timeout_s`;
- the whole body must be in within `body_deadline_s` of the headers, however steadily it
  trickles (a byte a second never leaves a gap, but never ends either).

Otherwise the connection is closed (a handler still reading the body sees a disconnect); a body
cut off is first answered 408, when no answer has started. The body's deadlines wait while
uvicorn itself has paused reading because the handler is slower than the client.
"""

from __future__ import annotations

import asyncio
import json
import logging

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from supervisor.errors import InvalidRequest

log = logging.getLogger("omnivoice.http")


class BodyTimeout(InvalidRequest):
    """The request body did not arrive in time; the connection is closed after this answer."""

    status = 408
    code = "request_body_timeout"


class ReadDeadlines(H11Protocol):
    header_timeout_s = 30.0
    body_timeout_s = 60.0
    body_deadline_s = 60.0
    _read_timer: asyncio.TimerHandle | None = None
    _body_timer: asyncio.TimerHandle | None = None

    @staticmethod
    def configured(header_s: float, body_s: float, body_deadline_s: float) -> type[ReadDeadlines]:
        """This protocol with these deadlines, as uvicorn's `http` (one is built per connection)."""

        class Configured(ReadDeadlines):
            header_timeout_s = header_s
            body_timeout_s = body_s

        Configured.body_deadline_s = body_deadline_s
        return Configured

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm(self.header_timeout_s, "its request headers")

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        state = self.conn.their_state
        if state is h11.SEND_BODY:
            # A gap between two reads of the body, and the whole body's deadline (set once).
            self._arm(self.body_timeout_s, "the next part of its request body")
            if self._body_timer is None:
                self._arm_body_deadline()
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
        if self._read_timer is not None:  # the body's whole deadline stands
            self._read_timer.cancel()
        self._read_timer = self.loop.call_later(delay_s, self._expired, delay_s, awaited)

    def _arm_body_deadline(self) -> None:
        self._body_timer = self.loop.call_later(self.body_deadline_s, self._body_late)

    def _body_late(self) -> None:
        if self.flow.read_paused and not self.transport.is_closing():
            self._arm_body_deadline()  # the handler is behind, not the client: wait for it
            return
        self._expired(self.body_deadline_s, "its whole request body")

    def _disarm(self) -> None:
        """Both timers off: the body (if any) is in, or the connection is gone."""
        for timer in (self._read_timer, self._body_timer):
            if timer is not None:
                timer.cancel()
        self._read_timer = self._body_timer = None

    def _expired(self, delay_s: float, awaited: str) -> None:
        if self.transport.is_closing():
            return
        if self.flow.read_paused:  # the handler is behind, not the client: wait for it
            self._arm(delay_s, awaited)
            return
        client = f"{self.client[0]}:{self.client[1]}" if self.client else "a client"
        log.info(
            "closing the connection from %s: %s did not arrive within %g s",
            client,
            awaited,
            delay_s,
        )
        if self.conn.their_state is h11.SEND_BODY:
            self._answer_timeout(f"{awaited} did not arrive within {delay_s:g} s")
        self._disarm()
        self.transport.close()

    def _answer_timeout(self, why: str) -> None:
        """A 408 written straight to the socket, when no answer has started (the handler is
        still waiting for the body: it sees a disconnect next, and answers nobody)."""
        if self.cycle is not None and self.cycle.response_started:
            return
        error = BodyTimeout(f"the request body was too slow: {why}; send it faster")
        body = json.dumps(error.to_body()).encode()
        head = (
            f"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
        )
        self.transport.write(head.encode() + body)
