"""sd_notify spoken directly on $NOTIFY_SOCKET; every call is a no-op outside systemd.

A notification is one AF_UNIX datagram of newline-separated KEY=VALUE lines (sd_notify(3)).
$NOTIFY_SOCKET is a filesystem path, or an abstract-namespace name written with a leading '@'.
systemd sets it for Type=notify units, with $WATCHDOG_USEC (and $WATCHDOG_PID) when
WatchdogSec= is on. `Notifier.run` is a task in the server's own event loop: it says READY=1
once `state()` reports ready, STATUS= whenever the text changes, EXTEND_TIMEOUT_USEC= while the
sidecars are still loading, and WATCHDOG=1 every half watchdog interval, but only while
`state()` says the server is alive. A blocked event loop therefore stops the pings, and systemd
aborts and restarts the service (WatchdogSec=, Restart=on-failure).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import Callable, MutableMapping
from typing import NamedTuple

log = logging.getLogger("omnivoice.systemd")

VARIABLES = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")
TICK_S = 0.25
STATUS_EVERY_S = 1.0  # STATUS= at most this often, unless it goes with READY=1 or STOPPING=1
EXTEND_EVERY_S = 10.0  # while loading, push systemd's start timeout out this often ...
EXTEND_BY_S = 30.0  # ... by this much (it never shortens TimeoutStartSec=)


class ServiceState(NamedTuple):
    """What the server tells systemd, sampled every tick."""

    ready: bool  # READY=1 may be sent (once)
    loading: bool  # not ready yet but still getting there: extend the start timeout
    alive: bool  # the server's own loops are turning: feed the watchdog
    status: str  # one line for `systemctl status`


class Notifier:
    """The server's line to systemd. Without $NOTIFY_SOCKET every method does nothing."""

    def __init__(
        self,
        address: str | None,
        watchdog_usec: int | None = None,
        clock: Callable[[], float] = time.monotonic,  # a seam: tests pass a fake
    ) -> None:
        self.address = address
        self.watchdog_s = watchdog_usec / 1e6 if watchdog_usec else None
        self.clock = clock
        self.is_ready = False
        self.is_stopping = False
        self._failed_once = False

    @classmethod
    def from_environ(cls, environ: MutableMapping[str, str]) -> Notifier:
        """Read systemd's variables and remove them, so that sidecars never see them."""
        address, usec, pid = (environ.pop(name, None) for name in VARIABLES)
        watchdog_usec = int(usec) if usec and usec.isdigit() and int(usec) > 0 else None
        if watchdog_usec is not None and pid and pid != str(os.getpid()):
            watchdog_usec = None  # the watchdog was meant for another process
        return cls(address or None, watchdog_usec)

    @property
    def enabled(self) -> bool:
        return self.address is not None

    def send(self, **fields: object) -> bool:
        """One datagram, `READY=1\\nSTATUS=...`; False (logged once) if it could not be sent."""
        if self.address is None:
            return False
        payload = "\n".join(f"{key}={value}" for key, value in fields.items()).encode()
        address = "\0" + self.address[1:] if self.address.startswith("@") else self.address
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
                sock.connect(address)
                sock.sendall(payload)
        except OSError as exc:
            if not self._failed_once:
                log.warning("cannot notify systemd at %s: %s", self.address, exc)
                self._failed_once = True
            return False
        return True

    def stopping(self, status: str) -> None:
        """STOPPING=1: a drain has begun. READY=1 is never sent after this."""
        if not self.is_stopping:
            self.is_stopping = True
            self.send(STOPPING=1, STATUS=status)

    async def run(self, state: Callable[[], ServiceState]) -> None:
        """Report to systemd until cancelled; runs as a task in the server's event loop."""
        if self.address is None:
            return
        interval = self.watchdog_s / 2 if self.watchdog_s else None
        tick = min(TICK_S, interval / 2) if interval else TICK_S
        if interval:
            log.info(
                "systemd watchdog: %.1f s; pinging every %.1f s from the event loop",
                self.watchdog_s,
                interval,
            )
        last_status, status_at, extended_at, ping_at = "", 0.0, 0.0, 0.0
        warned_dead = False
        while True:
            now, current = self.clock(), state()
            if current.ready and not self.is_ready and not self.is_stopping:
                self.is_ready = self.send(READY=1, STATUS=current.status)
                last_status, status_at = current.status, now
            elif current.status != last_status and now - status_at >= STATUS_EVERY_S:
                self.send(STATUS=current.status)
                last_status, status_at = current.status, now
            if (
                current.loading
                and not self.is_ready
                and not self.is_stopping
                and now - extended_at >= EXTEND_EVERY_S
            ):
                self.send(EXTEND_TIMEOUT_USEC=int(EXTEND_BY_S * 1e6))
                extended_at = now
            if interval and now - ping_at >= interval:
                if current.alive:
                    self.send(WATCHDOG=1)
                    ping_at, warned_dead = now, False
                elif not warned_dead:
                    log.error(
                        "the supervision loop has stopped turning; no more watchdog pings (%s)",
                        current.status,
                    )
                    warned_dead = True
            await asyncio.sleep(tick)
