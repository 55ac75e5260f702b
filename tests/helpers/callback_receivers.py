"""Receivers for the callback tests, on the loopback: one that behaves (`webhook`), and small
TCP servers that misbehave on purpose: they read a request whole, then answer at once, a byte at
a time, or never finish their headers; and a gzip answer that inflates to a gibibyte."""

from __future__ import annotations

import contextlib
import functools
import http.server
import itertools
import socket
import socketserver
import struct
import threading
import zlib
from collections.abc import Iterable, Iterator
from typing import Any

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"


def gzip_of_zeros(mib: int) -> bytes:
    """A gzip stream of `mib` MiB of zeros, about 1 KiB per MiB: one compressed MiB repeated
    (full flushes make every MiB after the first compress to the same bytes), then the trailer."""
    zeros = bytes(2**20)
    squeeze = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    first, again = (squeeze.compress(zeros) + squeeze.flush(zlib.Z_FULL_FLUSH) for _ in range(2))
    end = squeeze.flush()[:-8]  # the final empty block, without the trailer of 2 MiB
    crc = 0
    for _ in range(mib):
        crc = zlib.crc32(zeros, crc)
    return first + again * (mib - 1) + end + struct.pack("<II", crc, (mib * 2**20) % 2**32)


@functools.cache
def gzip_answer() -> bytes:
    """A 200 whose body is 1 MiB of gzip that inflates to 1 GiB (Content-Encoding: gzip)."""
    bomb = gzip_of_zeros(1024)
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
        b"Content-Length: %d\r\n\r\n" % len(bomb)
    )
    return head + bomb


class Receiver(socketserver.ThreadingTCPServer):
    """Reads each request whole, then answers `answer`: at once, or one byte every `every_s`
    seconds; with `endless`, the header section never ends (a header line after another)."""

    daemon_threads = True

    def __init__(
        self, host: str, answer: bytes, every_s: float | None = None, endless: bool = False
    ) -> None:
        self.answer, self.every_s, self.endless = answer, every_s, endless
        self.stop = threading.Event()
        self.requests = 0
        self.lock = threading.Lock()
        super().__init__((host, 0), ReceiverHandler)

    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/hook"


class ReceiverHandler(socketserver.BaseRequestHandler):
    server: Receiver

    def handle(self) -> None:
        conn: socket.socket = self.request
        data = b""
        while b"\r\n\r\n" not in data:
            data += conn.recv(65536)
        head, body = data.split(b"\r\n\r\n", 1)
        length = next(
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        while len(body) < length:
            body += conn.recv(65536)
        with self.server.lock:
            self.server.requests += 1
        try:
            if self.server.every_s is None:
                conn.sendall(self.server.answer)
                return
            end = itertools.cycle(b"X-Slow: 1\r\n") if self.server.endless else b"\r\n"
            for byte in itertools.chain(self.server.answer[:-2], end):
                if self.server.stop.wait(self.server.every_s):
                    return
                conn.sendall(bytes([byte]))
        except OSError:  # the sender closed the connection: what it should do
            pass


def serve(receiver: Receiver) -> Receiver:
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    return receiver


def close(receiver: Receiver) -> None:
    receiver.stop.set()  # a trickle stops at its next byte
    receiver.shutdown()
    receiver.server_close()


class Webhook(http.server.ThreadingHTTPServer):
    """A receiver that behaves: answers each POST with the next status of `answers` (then 200),
    and keeps every request it got as (answered, headers by lower-case name, body)."""

    def __init__(self, answers: Iterable[int] = (), host: str = "127.0.0.1") -> None:
        self.answers = list(answers)
        self.got: list[tuple[int, dict[str, str], bytes]] = []
        self.lock = threading.Lock()
        super().__init__((host, 0), WebhookHandler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/hooks/job"

    @property
    def statuses(self) -> list[int]:
        with self.lock:
            return [status for status, _, _ in self.got]

    def accepted(self) -> list[tuple[dict[str, str], bytes]]:
        with self.lock:
            return [(headers, body) for status, headers, body in self.got if status == 200]


class WebhookHandler(http.server.BaseHTTPRequestHandler):
    server: Webhook

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        with self.server.lock:
            status = self.server.answers.pop(0) if self.server.answers else 200
            headers = {name.lower(): value for name, value in self.headers.items()}
            self.server.got.append((status, headers, body))
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@contextlib.contextmanager
def webhook(answers: Iterable[int] = (), host: str = "127.0.0.1") -> Iterator[Webhook]:
    """A Webhook serving in a thread of its own for the block."""
    server = Webhook(answers, host)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
