"""Bounds on what clients hold: descriptors, connections, and answers they do not read.

- At start the soft `RLIMIT_NOFILE` is raised to the hard limit (`raise_descriptor_limit`).
- Open connections are capped in all and per client address (an IPv6 /64 is one address:
  one host has all of it), well under that limit, so that sidecars, the store and callbacks
  always find a descriptor (`ConnectionBook.admit`). A connection past a cap is answered 503
  at once, without reading anything, and closed: cheaper than reading what it sends, and a
  client that reads the answer is told when to come back (one that is still sending may see
  the connection reset instead).
- A connection whose client takes none of its pending answer for `send_timeout_s` is dropped
  and the bytes held for it are released (supervisor/http/guarded.py); while they are held
  they count against admission, in all and per key (`UnsentLimit`).
- The listen backlog is sized from what the caps leave (`ConnectionBook.backlog`): asyncio
  accepts that many at once before any connection's protocol runs.
- Accept errors (EMFILE and the like: asyncio retries the accept a second later) and refused
  connections are logged once per burst, not a line (or a traceback) per attempt (`Burst`).
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import logging
import resource
from collections import Counter
from typing import Protocol

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from supervisor.errors import Overloaded
from supervisor.http.auth import TENANT, reply
from supervisor.settings import HttpSettings
from supervisor.tenants import OPEN

log = logging.getLogger("omnivoice.http")

MIN_RESERVED_FDS = 256  # descriptors kept for sidecars, the store, callbacks and logs
MAX_DERIVED_CONNECTIONS = 16384
BURST_S = 10.0  # a burst of accept errors or refusals is summed up this long after it began
RESOURCE_ERRORS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
# The routes that make audio for the answer: refused while their clients' answers wait unread.
SYNTHESIS_PATHS = frozenset(
    {"/v1/audio/speech", "/v1/audio/speech/captioned", "/v1/audio/clone", "/v1/audio/design"}
)
MB = 2**20


def raise_descriptor_limit() -> None:
    """Raise the soft RLIMIT_NOFILE to the hard limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft >= hard:
        return
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError) as exc:
        log.warning("cannot raise the descriptor limit from %d to %d: %s", soft, hard, exc)
    else:
        log.info("descriptor limit raised from %d to %d", soft, hard)


def descriptor_limit() -> int:
    """The soft RLIMIT_NOFILE in force (an unlimited one counts as plenty)."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return soft if soft != resource.RLIM_INFINITY else 4 * MAX_DERIVED_CONNECTIONS


def connection_caps(settings: HttpSettings, descriptors: int) -> tuple[int, int]:
    """(in all, per client address): the settings, else derived from the descriptor limit."""
    reserved = max(MIN_RESERVED_FDS, descriptors // 4)
    derived = max(8, min(MAX_DERIVED_CONNECTIONS, descriptors - reserved))
    total = settings.max_connections or derived
    return total, settings.max_connections_per_peer or max(1, total // 4)


def peer_of(client: tuple[str, int] | None) -> str:
    """The address a connection counts against: its IP, or for IPv6 its /64."""
    if client is None:
        return "unix"
    try:
        address = ipaddress.ip_address(client[0])
    except ValueError:
        return client[0]
    if address.version == 6 and not address.is_loopback:
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(address)


class Burst:
    """One warning when something starts happening, and one with the count once it has gone
    on for BURST_S: a flood of the same failure costs two lines, not one per attempt."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.count = 0

    def note(self, detail: str) -> None:
        self.count += 1
        if self.count > 1:
            return
        log.warning("%s (%s); more within %g s are counted, not logged", self.what, detail, BURST_S)
        asyncio.get_running_loop().call_later(BURST_S, self.summary)

    def summary(self) -> None:
        if self.count > 1:
            log.warning("%s: %d times in %g s", self.what, self.count, BURST_S)
        self.count = 0


class Sending(Protocol):
    """A connection as the book sees it while its answer waits for its client."""

    @property
    def unsent_bytes(self) -> int: ...


class Held(Protocol):
    """A connection as the book sees it while it holds a place."""

    @property
    def receiving_request(self) -> bool: ...

    def evict(self) -> None: ...


class ConnectionBook:
    """Connections open, per client address; and those whose answers wait unread, per owner."""

    def __init__(self, settings: HttpSettings, descriptors: int) -> None:
        self.total_cap, self.peer_cap = connection_caps(settings, descriptors)
        # The listen backlog, which asyncio also takes as the most connections it accepts at
        # once, before any of their protocols runs (and so before a cap can refuse one): a
        # burst of accepts must fit in the descriptors the caps leave.
        self.backlog = max(16, min(2048, (descriptors - self.total_cap) // 4))
        self.send_timeout_s = settings.send_timeout_s
        self.unsent_cap = int(settings.max_unsent_mb * MB)
        self.unsent_key_cap = int(settings.max_unsent_mb_per_key * MB)
        self.open: Counter[str] = Counter()
        self.in_flight: Counter[str] = Counter()  # HTTP requests not yet answered, per owner
        self.held: dict[str, dict[Held, None]] = {}  # per address, oldest first
        self.total = 0
        self.waiting: dict[Sending, str | None] = {}  # the owner of the request, if known
        self.refusals = Burst("connections refused: the server holds as many as it takes")
        self.accept_errors = Burst("cannot accept connections")

    def admit(self, peer: str, conn: Held) -> bool:
        """Count a new connection from `peer`, or say False (and count nothing) past a cap.
        At the cap in all, a newcomer from an address holding fewer takes the place of the
        oldest connection still sending its request (headers or body, no answer begun) of
        the address holding the most that has one: a few addresses cannot fill every place
        and keep the rest out."""
        if self.open[peer] >= self.peer_cap or (
            self.total >= self.total_cap and not self._make_room(peer)
        ):
            self.refusals.note(
                f"{self.total} open of {self.total_cap}, {self.open[peer]} from {peer} "
                f"of {self.peer_cap}"
            )
            return False
        self.open[peer] += 1
        self.total += 1
        self.held.setdefault(peer, {})[conn] = None
        return True

    def _make_room(self, newcomer: str) -> bool:
        for peer, count in self.open.most_common():  # the heaviest with such a connection
            if count <= self.open[newcomer] + 1:
                return False
            idle = next((c for c in self.held.get(peer, {}) if c.receiving_request), None)
            if idle is not None:
                idle.evict()  # releases its place
                return True
        return False

    def release(self, peer: str, conn: Held) -> None:
        self.open[peer] -= 1
        self.total -= 1
        self.held.get(peer, {}).pop(conn, None)
        if self.open[peer] <= 0:
            del self.open[peer]
            self.held.pop(peer, None)

    def unsent(self, owner: str | None = None) -> int:
        """Bytes of answers waiting for their clients: in all, or of one owner's requests."""
        return sum(
            conn.unsent_bytes
            for conn, whose in self.waiting.items()
            if owner is None or whose == owner
        )

    def check_unsent(self, owner: str | None) -> None:
        """Raise Overloaded while answers wait unread past a cap, in all or of this owner."""
        held, mine = self.unsent(), self.unsent(owner) if owner is not None else 0
        if held < self.unsent_cap and mine < self.unsent_key_cap:
            return
        whose = "this key's" if mine >= self.unsent_key_cap else "all"
        error = Overloaded(
            f"{whose} answers not yet read by their clients hold {max(mine, held) / MB:.0f} MiB: "
            "read them (a client that does not is dropped after --send-timeout-s)",
            retry_after_s=self.send_timeout_s,
        )
        error.code = "answers_unread"
        raise error

    def health(self) -> dict[str, int]:
        """/health's `connections`: open and their cap, and the bytes of answers unread."""
        return {
            "open": self.total,
            "max": self.total_cap,
            "max_per_peer": self.peer_cap,
            "unread_bytes": self.unsent(),
        }

    def accept_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, object]) -> None:
        """The event loop's exception handler: an accept short of a resource is noted in the
        burst; anything else goes to the default handler."""
        exc = context.get("exception")
        if isinstance(exc, OSError) and exc.errno in RESOURCE_ERRORS:
            self.accept_errors.note(f"{context.get('message')}: {exc}; {self.total} open")
            return
        loop.default_exception_handler(context)


class UnsentLimit:
    """ASGI middleware: a request that would make audio is refused (429, Retry-After) while
    answers already made wait unread past the caps: in all, and of its key. Checked again as
    its answer starts: answers asked for at once are all admitted before any waits, so the
    first check alone would let one key's cap be passed by as many answers as it asks for
    together. An answer refused then is dropped and the 429 sent in its place."""

    def __init__(self, app: ASGIApp, book: ConnectionBook) -> None:
        self.app = app
        self.book = book

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] not in SYNTHESIS_PATHS:
            await self.app(scope, receive, send)
            return
        tenant = scope.get(TENANT)
        owner = tenant.owner if tenant is not None else None
        try:
            self.book.check_unsent(owner)
        except Overloaded as error:
            await reply(error, scope, receive, send)
            return
        refused = False

        async def send_checked(message: Message) -> None:
            nonlocal refused
            if message["type"] == "http.response.start" and message["status"] < 300:
                try:
                    self.book.check_unsent(owner)
                except Overloaded as error:
                    refused = True
                    await reply(error, scope, receive, send)
                    return
            if not refused:
                await send(message)

        await self.app(scope, receive, send_checked)


class KeyRequests:
    """ASGI middleware: a key has at most an address's cap of HTTP requests in flight; past
    it, 429 with Retry-After. Otherwise one key's requests, held in flight (queued behind slow
    batches) from a few addresses, could take every place there is; refused, their
    connections are idle and make room for others (ConnectionBook.admit). A server without
    keys has one tenant, and no such cap."""

    def __init__(self, app: ASGIApp, book: ConnectionBook) -> None:
        self.app = app
        self.book = book

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        tenant = scope.get(TENANT)
        if scope["type"] != "http" or tenant is None or tenant is OPEN:
            await self.app(scope, receive, send)
            return
        owner, flights = tenant.owner, self.book.in_flight
        if flights[owner] >= self.book.peer_cap:
            error = Overloaded(
                f"this key has {flights[owner]} requests in flight, as many as it may: "
                "wait for their answers",
                retry_after_s=1,
            )
            error.code = "too_many_requests"
            await reply(error, scope, receive, send)
            return
        flights[owner] += 1
        try:
            await self.app(scope, receive, send)
        finally:
            flights[owner] -= 1
            if flights[owner] <= 0:
                del flights[owner]
