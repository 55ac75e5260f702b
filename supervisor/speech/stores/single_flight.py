"""Single flight: identical reproducible requests in flight are made once.

Speech requests with the same result-cache key (`result_cache.key`: the same text, seed, voice,
format and settings, so the same bytes) that arrive while the first is still being made would
make the same audio again. The first one leads; the others wait and are answered with its
audio once it has gone out whole (`X-Cache: hit`). A leader that ends with nothing to share
(it failed, its client left, its audio failed the checks) lands empty: its waiters do not
inherit its error, the first of them to wake leads its own attempt and the rest wait for that
one. A waiter keeps its own deadline and notices its own client leaving.
"""

from __future__ import annotations

import asyncio

from supervisor import metrics
from supervisor.speech.stores.result_cache import CachedResult


class Flight:
    """One request making the answer for a key; `land` ends it (the first call counts)."""

    def __init__(self, key: str, flights: Flights) -> None:
        self.key = key
        self._flights = flights
        self._landed = asyncio.Event()
        self._result: CachedResult | None = None

    def land(self, result: CachedResult | None) -> None:
        """The answer to share, or None (nothing to share: a waiter makes its own). A flight
        that landed with an answer stays listed until `release` (its answer is being written
        to the cache: a request that comes meanwhile is answered with it, not made again)."""
        if self._landed.is_set():
            return
        self._result = result
        self._landed.set()
        if result is None:
            self.release()

    def release(self) -> None:
        self._flights.landed(self)

    async def result(self) -> CachedResult | None:
        metrics.single_flight_waiting.inc()
        try:
            await self._landed.wait()
        finally:
            metrics.single_flight_waiting.dec()
        if self._result is not None:
            metrics.single_flight_shared.inc()
        return self._result


class Flights:
    """The flights of one server, by key (on the event loop: no locks)."""

    def __init__(self) -> None:
        self._flying: dict[str, Flight] = {}

    def flying(self, key: str) -> Flight | None:
        return self._flying.get(key)

    def lead(self, key: str) -> Flight:
        """Start the flight for `key`; call only when `flying(key)` is None."""
        assert key not in self._flying, key
        flight = self._flying[key] = Flight(key, self)
        return flight

    def landed(self, flight: Flight) -> None:
        if self._flying.get(flight.key) is flight:
            del self._flying[flight.key]
