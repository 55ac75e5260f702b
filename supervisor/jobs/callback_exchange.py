"""One callback POST, bounded so that no receiver can hurt the server, and the slots that bound
how many are under way.

- One deadline (`--callback-timeout-s`) around the whole exchange: connecting, sending the
  body, and the answer's status line and headers. A receiver that trickles its answer a byte at
  a time fails the attempt at the deadline, however often it sends.
- The status decides; the answer's body is never read: the connection is closed once the
  headers are in (httpcore reads 64 KiB at a time and refuses a header section over 100 KiB),
  and `Accept-Encoding: identity` asks for no compression, so an answer of any size, gzip
  included, costs the server at most one such read.
- Slots: at most `--callback-host-concurrency` callbacks under way at once to one receiver
  host (the name or IP the URL names, every port together) and `--callback-concurrency` in all,
  per server. A due callback without a free slot is not started (nor counted as an attempt): it
  stays due, and a later pass of the runner starts it once a slot is free. So callbacks waiting
  for a slow host hold none of the slots other hosts need.
"""

from __future__ import annotations

import asyncio

import httpx


def client(deadline_s: float) -> httpx.AsyncClient:
    """The sender's client: no redirects, no proxy from the environment, no pooled connections
    (every exchange ends by closing its own; the slots bound how many there are)."""
    return httpx.AsyncClient(
        timeout=httpx.Timeout(deadline_s, pool=None),
        limits=httpx.Limits(max_connections=None, max_keepalive_connections=0),
        follow_redirects=False,  # a redirect could lead off the allow-list
        trust_env=False,  # the allow-list is the whole story
    )


async def post(
    sender: httpx.AsyncClient, url: str, body: bytes, headers: dict[str, str], deadline_s: float
) -> int:
    """POST `body` to `url` and answer the status; asyncio.TimeoutError past `deadline_s`, and
    whatever httpx raises for anything else that goes wrong."""

    async def exchange() -> int:
        request = {**headers, "Accept-Encoding": "identity"}
        async with sender.stream("POST", url, content=body, headers=request) as answer:
            return answer.status_code  # leaving the block closes the connection, body unread

    return await asyncio.wait_for(exchange(), deadline_s)


class Slots:
    """Per-host and total limits on exchanges at once: a callback is started only with a slot."""

    def __init__(self, per_host: int, total: int) -> None:
        self.per_host, self.total = per_host, total
        self.hosts: dict[str, int] = {}  # host -> slots taken (no entry: none)
        self.taken = 0

    def take(self, host: str) -> bool:
        """One of `host`'s slots and one of the total, if both are free."""
        if self.taken >= self.total or self.hosts.get(host, 0) >= self.per_host:
            return False
        self.hosts[host] = self.hosts.get(host, 0) + 1
        self.taken += 1
        return True

    def give_back(self, host: str) -> None:
        self.taken -= 1
        self.hosts[host] -= 1
        if not self.hosts[host]:
            del self.hosts[host]  # no entry kept for a host with nothing under way
