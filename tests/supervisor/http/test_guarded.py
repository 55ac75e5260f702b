"""supervisor/http/guarded.py: uvicorn with the guarded protocol, on a real socket, its book read
in this process. A connection past a cap is answered the refusal at once and counts nothing,
even when it ends; a place comes back when its connection ends. While a client takes none of
its answer, the connection waits in the book under its request's owner until the client reads
(then the deadline stops) or the send deadline drops it."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator

import h11
import pytest
import uvicorn
from starlette.types import Receive, Scope, Send

from supervisor.http.auth import TENANT
from supervisor.http.connections import ConnectionBook
from supervisor.http.guarded import REFUSAL_RETRY_S, Guarded, refusal
from supervisor.http.read_deadlines import ReadDeadlines
from supervisor.settings import Settings
from supervisor.tenants import Tenant
from tests.helpers.ports import free_port
from tests.helpers.waits import wait_until

PER_PEER = 2
ANSWER = 16 * 2**20  # far more than the socket buffers hold: the transport pauses writing
WAIT_S = 30.0


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    """`/big`: a large answer, its request owned by "owner-1" (as the auth middleware says)."""
    if scope["type"] != "http":
        return
    scope[TENANT] = Tenant("owner-1")
    body = b"x" * ANSWER if scope["path"] == "/big" else b"small"
    length = [(b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": length})
    await send({"type": "http.response.body", "body": body})


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[int, ConnectionBook]]:
    settings = Settings(engine="null", max_connections=8, max_connections_per_peer=PER_PEER)
    book = ConnectionBook(settings.http, 1024)
    chosen = free_port()
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=chosen,
        http=Guarded.guarding(ReadDeadlines.configured(30, 30, 60), book),
        log_level="warning",
        lifespan="off",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_until(lambda: server.started, WAIT_S, "uvicorn to listen")
    yield chosen, book
    server.should_exit = True
    thread.join(10)


@contextlib.contextmanager
def connection(port: int, receive_buffer: int | None = None) -> Iterator[socket.socket]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        if receive_buffer is not None:  # set before connecting, so the window stays small
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        sock.settimeout(WAIT_S)
        sock.connect(("127.0.0.1", port))
        yield sock


def get(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()


def read_all(sock: socket.socket) -> bytes:
    answer = b""
    with contextlib.suppress(ConnectionResetError):
        while chunk := sock.recv(2**20):
            answer += chunk
    return answer


def test_the_refusal_is_a_whole_503_that_closes_the_connection() -> None:
    client = h11.Connection(h11.CLIENT)
    client.send(h11.Request(method="GET", target="/", headers=[("Host", "x")]))
    client.send(h11.EndOfMessage())
    client.receive_data(refusal())
    head = client.next_event()
    assert isinstance(head, h11.Response) and head.status_code == 503
    headers = dict(head.headers)
    assert headers[b"retry-after"] == str(REFUSAL_RETRY_S).encode()
    assert headers[b"connection"] == b"close"
    body = client.next_event()
    assert isinstance(body, h11.Data)
    error = json.loads(body.data)["error"]
    assert error["code"] == "too_many_connections"
    assert isinstance(client.next_event(), h11.EndOfMessage)  # the length is right


def test_past_the_cap_a_connection_is_refused_unheard_and_its_end_counts_nothing(
    served: tuple[int, ConnectionBook],
) -> None:
    port, book = served
    with connection(port) as first, connection(port) as second:
        wait_until(lambda: book.total == PER_PEER, WAIT_S, "both connections counted")
        with connection(port) as third:  # sends nothing
            assert read_all(third) == refusal()
        first.sendall(get("/small"))  # the two held are still served
        assert read_all_until(first, b"small").startswith(b"HTTP/1.1 200 ")
        assert book.total == PER_PEER and book.open["127.0.0.1"] == PER_PEER  # by now, the
        # refused connection's end has run (it was scheduled when it was closed)
        second.close()
    wait_until(lambda: book.total == 0, WAIT_S, "the places to come back")
    assert "127.0.0.1" not in book.open
    with connection(port) as again:
        again.sendall(get("/small"))
        assert read_all_until(again, b"small").startswith(b"HTTP/1.1 200 ")


def read_all_until(sock: socket.socket, end: bytes) -> bytes:
    answer = b""
    while not answer.endswith(end) and (chunk := sock.recv(4096)):
        answer += chunk
    return answer


def test_an_unread_answer_waits_under_its_owner_until_the_client_reads_it(
    served: tuple[int, ConnectionBook],
) -> None:
    port, book = served
    book.send_timeout_s = WAIT_S  # the client reads long before
    with connection(port, receive_buffer=4096) as sock:
        sock.sendall(get("/big"))
        wait_until(lambda: list(book.waiting.values()) == ["owner-1"], WAIT_S, "a pause")
        assert book.unsent("owner-1") > 2**20 and book.unsent("someone-else") == 0
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2**22)  # now read it quickly
        answer = read_all_until(sock, b"x" * ANSWER)
        assert answer.startswith(b"HTTP/1.1 200 ")
        assert book.waiting == {}  # and its deadline stopped with it
    wait_until(lambda: book.total == 0, WAIT_S, "the place to come back")


def test_a_client_that_takes_none_of_its_answer_is_dropped_at_the_deadline(
    served: tuple[int, ConnectionBook],
) -> None:
    port, book = served
    book.send_timeout_s = 0.5
    with connection(port, receive_buffer=4096) as sock:
        sock.sendall(get("/big"))
        wait_until(lambda: book.waiting != {}, WAIT_S, "a pause")
        wait_until(lambda: book.waiting == {}, WAIT_S, "the deadline to drop it")
        wait_until(lambda: book.total == 0, WAIT_S, "its place to come back")
        assert len(read_all(sock)) < ANSWER  # aborted: the answer never came whole
