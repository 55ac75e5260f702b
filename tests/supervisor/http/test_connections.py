"""The connection book's arithmetic: the caps derived from the descriptor limit, the address a
connection counts against, and the caps on connections and on answers waiting unread. The
same book in a real server, with real sockets: tests/integration/test_connections.py."""

from __future__ import annotations

import asyncio

import pytest

from supervisor.errors import Overloaded
from supervisor.http.connections import MB, ConnectionBook, connection_caps, peer_of
from supervisor.settings import Settings


def settings(**values: object) -> Settings:
    return Settings(model="", engine="null", **values)


@pytest.mark.parametrize(
    ("descriptors", "caps"),
    [(1024, (768, 192)), (256, (8, 2)), (524288, (16384, 4096))],
)
def test_caps_leave_room_for_sidecars_the_store_and_callbacks(
    descriptors: int, caps: tuple[int, int]
) -> None:
    assert connection_caps(settings().http, descriptors) == caps


def test_caps_set_are_taken_as_they_are() -> None:
    given = settings(max_connections=100, max_connections_per_peer=7)
    assert connection_caps(given.http, 1024) == (100, 7)


@pytest.mark.parametrize(
    ("client", "peer"),
    [
        (("127.0.0.1", 5), "127.0.0.1"),
        (("::1", 5), "::1"),
        (("2001:db8::1", 5), "2001:db8::/64"),
        (("2001:db8::ffff:1", 5), "2001:db8::/64"),
        (("::ffff:10.0.0.1", 5), "10.0.0.1"),
        (None, "unix"),
    ],
)
def test_an_ipv6_host_counts_as_its_64(client: tuple[str, int] | None, peer: str) -> None:
    assert peer_of(client) == peer


class Conn:
    """A connection as the book sees it: waiting for a request or not; evicted when asked."""

    def __init__(self, book: ConnectionBook, peer: str, *, receiving_request: bool) -> None:
        self.book, self.peer, self.receiving_request = book, peer, receiving_request
        self.evicted = False

    def evict(self) -> None:
        self.evicted = True
        self.book.release(self.peer, self)


def test_a_connection_past_either_cap_is_refused_and_its_place_comes_back() -> None:
    async def scenario() -> None:  # a refusal is noted in a burst, on the running loop
        book = ConnectionBook(settings(max_connections=3, max_connections_per_peer=2).http, 1024)
        a1, a2, b, c = (Conn(book, p, receiving_request=False) for p in "aabc")
        assert book.admit("a", a1) and book.admit("a", a2)
        assert not book.admit("a", Conn(book, "a", receiving_request=True))  # per address
        assert book.admit("b", b)
        assert not book.admit("c", c)  # in all: nothing of a's is waiting for a request
        assert book.refusals.count == 2
        book.release("a", a1)
        assert book.admit("c", c) and book.total == 3

    asyncio.run(scenario())


def test_at_the_cap_in_all_a_lighter_address_takes_the_heaviest_ones_oldest_idle_place() -> None:
    async def scenario() -> None:
        book = ConnectionBook(settings(max_connections=4, max_connections_per_peer=3).http, 1024)
        busy = Conn(book, "a", receiving_request=False)
        idle = [Conn(book, "a", receiving_request=True) for _ in range(2)]
        for conn in (busy, *idle):
            assert book.admit("a", conn)
        assert book.admit("b", Conn(book, "b", receiving_request=True))
        assert book.admit("c", Conn(book, "c", receiving_request=True))
        assert [conn.evicted for conn in (busy, *idle)] == [False, True, False]
        assert book.total == 4 and book.open["a"] == 2
        # b holds 1, a 2: no longer more than one apart, so b's next is refused
        assert not book.admit("b", Conn(book, "b", receiving_request=True))

    asyncio.run(scenario())


def test_making_room_passes_over_an_address_whose_connections_all_wait_for_answers() -> None:
    async def scenario() -> None:
        book = ConnectionBook(settings(max_connections=4, max_connections_per_peer=2).http, 1024)
        busy = [Conn(book, "a", receiving_request=False) for _ in range(2)]
        sending = [Conn(book, "b", receiving_request=True) for _ in range(2)]
        for conn in (*busy, *sending):
            assert book.admit(conn.peer, conn)
        assert book.admit("c", Conn(book, "c", receiving_request=True))
        assert [conn.evicted for conn in (*busy, *sending)] == [False, False, True, False]

    asyncio.run(scenario())


class Waiting:
    def __init__(self, unsent_bytes: int) -> None:
        self.unsent_bytes = unsent_bytes


def test_answers_waiting_unread_count_in_all_and_per_key() -> None:
    book = ConnectionBook(settings(max_unsent_mb=10, max_unsent_mb_per_key=4).http, 1024)
    book.waiting[Waiting(3 * MB)] = "a"
    book.check_unsent("a")
    book.waiting[Waiting(2 * MB)] = "a"
    with pytest.raises(Overloaded, match="this key's"):
        book.check_unsent("a")
    book.check_unsent("b")
    book.waiting[Waiting(6 * MB)] = "b"
    with pytest.raises(Overloaded) as refused:
        book.check_unsent("c")
    assert refused.value.code == "answers_unread" and refused.value.retry_after_s == 60
