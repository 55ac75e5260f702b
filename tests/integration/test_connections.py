"""Issue 48's descriptor exhaustion and unread answers, replayed with real sockets against a
real server process whose descriptor limit is low (set before it starts, soft and hard, so
that the attack is cheap), on loopback only.

The attacker's connections come from 127.0.0.2 (the whole of 127.0.0.0/8 is loopback on
Linux), so the client that must still be served, on 127.0.0.1, is another address.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from websockets.sync.client import connect

from tests.helpers.harness import assert_gone
from tests.helpers.live_server import KEY, LiveServer, live, start, stop
from tests.helpers.waits import wait_until

DESCRIPTORS = 256  # the server's RLIMIT_NOFILE, soft and hard: it cannot raise it
ATTACKS = 400  # more connections than the server has descriptors
PER_PEER = 16
BOUND_S = 60.0
HEADER_S = "600"  # the attackers hold their connections for the whole test, however slow
LIMITED = (
    "import os, resource, sys; "
    f"resource.setrlimit(resource.RLIMIT_NOFILE, ({DESCRIPTORS}, {DESCRIPTORS})); "
    "os.execv(sys.executable, [sys.executable, '-m', 'supervisor', *sys.argv[1:]])"
)
HALF_SENT = b"POST /v1/audio/speech HTTP/1.1\r\nHost: localhost\r\nContent-Type: appl"


@contextlib.contextmanager
def limited_server(log_dir: Path, *flags: str) -> Iterator[LiveServer]:
    argv = [sys.executable, "-c", LIMITED, "serve", "--engine", "null", "--api-key", KEY]
    argv += ["--warmup-steps", "1", "--stop-timeout-s", "5", "--header-timeout-s", HEADER_S, *flags]
    server, pids = start(log_dir, argv)
    try:
        yield server
    finally:
        stop(server.proc)
        assert_gone(pids)


def speech(seconds: float | None = None) -> dict[str, object]:
    body: dict[str, object] = {"model": "tts-1", "input": "Hello there.", "voice": "alloy"}
    body["response_format"] = "wav"
    if seconds is not None:
        body["duration"] = seconds
    return body


def half_sent(
    port: int, source: str, head: bytes = HALF_SENT, timeout_s: float = BOUND_S
) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind((source, 0))
        sock.settimeout(timeout_s)
        sock.connect(("127.0.0.1", port))
        sock.sendall(head)
    except BaseException:
        sock.close()  # else the next test sees its ResourceWarning
        raise
    return sock


def refused(sock: socket.socket) -> bool:
    """Whether the server answered this connection at once (its 503) or closed it."""
    sock.settimeout(0.0)
    try:
        data = sock.recv(4096)
    except BlockingIOError:
        return False  # held open, waiting for the rest of the headers
    except ConnectionResetError:
        return True
    return data == b"" or data.startswith(b"HTTP/1.1 503")


def sidecar_pid(server: LiveServer) -> int:
    pid: int = server.health()["sidecars"][0]["pid"]
    return pid


def test_half_sent_connections_past_the_cap_are_refused_and_the_server_serves(
    tmp_path: Path,
) -> None:
    """Before: one client's half-sent requests took every descriptor; /ready and speech timed
    out, each accept logged a traceback, and a sidecar that died meanwhile could not be
    respawned (EMFILE) and failed the device."""
    flags = ("--max-connections", "64", "--max-connections-per-peer", str(PER_PEER))
    with limited_server(tmp_path, *flags) as server:
        port = int(server.url.rsplit(":", 1)[1])
        held: list[socket.socket] = []
        try:
            for _ in range(ATTACKS):
                held.append(half_sent(port, "127.0.0.2"))
            wait_until(
                lambda: sum(refused(s) for s in held) >= ATTACKS - PER_PEER,
                BOUND_S,
                "the connections past the cap to be refused",
            )
            assert not any(refused(s) for s in held[:PER_PEER])  # the first ones are held

            assert httpx.get(server.url + "/ready", timeout=BOUND_S).status_code == 200
            answer = server.request("POST", "/v1/audio/speech", json=speech(), timeout=BOUND_S)
            assert answer.status_code == 200, answer.text

            dead = sidecar_pid(server)
            os.kill(dead, signal.SIGKILL)
            server.wait_for(
                lambda b: (
                    b["sidecars"][0]["pid"] not in (dead, None)
                    and b["sidecars"][0]["state"] == "ready"
                ),
                BOUND_S,
                "the sidecar to be respawned",
            )
            answer = server.request("POST", "/v1/audio/speech", json=speech(), timeout=BOUND_S)
            assert answer.status_code == 200, answer.text
        finally:
            for sock in held:
                sock.close()
        log = server.log.read_text()
        assert "Too many open files" not in log
        assert log.count("connections refused") <= 2  # one burst: its first line and its sum


SLOW_BODY = (  # a tenant's key, whole headers, and a body that never ends
    f"POST /v1/audio/speech HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {KEY}\r\n"
    'Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"input": '
).encode()


@pytest.mark.parametrize("attack", [HALF_SENT, SLOW_BODY], ids=["headers", "body"])
def test_a_few_addresses_filling_every_place_cannot_keep_another_out(
    tmp_path: Path, attack: bytes
) -> None:
    """Before: three addresses, each within its own cap, filled the cap in all with half-sent
    requests (or, with a key, requests whose body never ends), and every other client
    (/ready, speech with a key) got 503 for as long as they held them. Now a newcomer from a
    lighter address takes the place of the oldest connection still sending its request from
    the address that holds the most."""
    flags = ("--max-connections", str(3 * PER_PEER), "--max-connections-per-peer", str(PER_PEER))
    with limited_server(
        tmp_path, *flags, "--body-timeout-s", HEADER_S, "--body-deadline-s", HEADER_S
    ) as server:
        port = int(server.url.rsplit(":", 1)[1])
        held: list[socket.socket] = []
        try:
            for source in ("127.0.0.2", "127.0.0.3", "127.0.0.4"):
                held.extend(half_sent(port, source, attack) for _ in range(PER_PEER))
            assert httpx.get(server.url + "/ready", timeout=BOUND_S).status_code == 200
            answer = server.request("POST", "/v1/audio/speech", json=speech(), timeout=BOUND_S)
            assert answer.status_code == 200, answer.text
            assert 1 <= sum(refused(s) for s in held) <= 2  # one place each, held by the first
        finally:
            for sock in held:
                sock.close()


def test_one_keys_requests_in_flight_from_a_few_addresses_cannot_keep_another_out(
    tmp_path: Path,
) -> None:
    """Before: a key's whole requests, held in flight behind slow batches, from three
    addresses each within its own cap, took every place: /ready from another address got 503
    until they were answered. Now a key has at most an address's worth of requests in flight;
    past that it is told 429, and its idle connections make room for other addresses."""
    flags = ("--max-connections", str(3 * PER_PEER), "--max-connections-per-peer", str(PER_PEER))
    flags += ("--max-batch-size", "1", "--drain-s", "1")
    with live(tmp_path, *flags, faults=True) as server:
        port = int(server.url.rsplit(":", 1)[1])
        body = json.dumps({"input": "[[fault:slow:3]] Hi.", "voice": "alloy"}).encode()
        head = (
            f"POST /v1/audio/speech HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {KEY}"
            f"\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        held: list[socket.socket] = []
        try:
            for source in ("127.0.0.2", "127.0.0.3", "127.0.0.4"):
                held.extend(half_sent(port, source, head.encode() + body) for _ in range(PER_PEER))
            wait_until(
                lambda: server.log.read_text().count("429 trace_id") >= 2 * PER_PEER,
                BOUND_S,
                "the key's requests past its share told 429",
            )
            ready = httpx.get(server.url + "/ready", timeout=BOUND_S)
            assert ready.status_code == 200, server.log.read_text()[-3000:]
        finally:
            for sock in held:
                sock.close()


def test_accept_errors_are_logged_once_a_burst_and_a_respawn_waits_for_descriptors(
    tmp_path: Path,
) -> None:
    """With caps set above the descriptor limit (a misconfiguration), accepts fail with EMFILE.
    Before: a traceback for each, and the sidecar that died meanwhile failed its device at
    once. Now: a line per burst, and the respawn backs off until descriptors are free."""
    flags = ("--max-connections", "9999", "--max-connections-per-peer", "9999")
    flags += ("--max-restarts", "50")
    with limited_server(tmp_path, *flags) as server:
        port = int(server.url.rsplit(":", 1)[1])
        dead = sidecar_pid(server)
        held: list[socket.socket] = []
        try:
            # Until the server runs out: past that its accept queue fills, and a connect waits
            # for the kernel's SYN retries (a queue found full ends the opening: the server has
            # stopped accepting, and says so in its log).
            while "cannot accept connections" not in server.log.read_text():
                assert len(held) < ATTACKS, "the server never ran out of descriptors"
                try:
                    held.append(half_sent(port, "127.0.0.2", timeout_s=5.0))
                except TimeoutError:
                    break
            try:
                wait_until(
                    lambda: "cannot accept connections" in server.log.read_text(),
                    BOUND_S,
                    f"the server to log that it cannot accept connections ({len(held)} held)",
                )
            except AssertionError as exc:
                raise AssertionError(server.log.read_text()[-3000:]) from exc
            os.kill(dead, signal.SIGKILL)
            try:
                wait_until(
                    lambda: "trying again after a back-off" in server.log.read_text(),
                    BOUND_S,
                    "the server to log that it tries again after a back-off",
                )
            except AssertionError as exc:
                raise AssertionError(server.log.read_text()[-3000:]) from exc
        finally:
            for sock in held:
                sock.close()
        body = server.wait_for(
            lambda b: (
                b["sidecars"][0]["pid"] not in (dead, None) and b["sidecars"][0]["state"] == "ready"
            ),
            BOUND_S,
            "the sidecar to be respawned",
        )
        assert body["status"] == "ok"
        answer = server.request("POST", "/v1/audio/speech", json=speech(), timeout=BOUND_S)
        assert answer.status_code == 200, answer.text
        log = server.log.read_text()
        assert "Traceback" not in log
        assert log.count("cannot accept connections") <= 12  # two lines a burst of 10 s


def non_reading_request(port: int, body: bytes) -> socket.socket:
    """A client asking for a large answer on a socket with a tiny receive buffer, that never
    reads it."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: the window
    sock.connect(("127.0.0.1", port))
    head = (
        f"POST /v1/audio/speech HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {KEY}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    sock.sendall(head.encode() + body)
    return sock


def test_a_client_that_does_not_read_is_dropped_and_its_bytes_released(tmp_path: Path) -> None:
    """Before: a made answer left the queue's accounting, and with no send deadline a client
    that never read held it in the supervisor's memory for as long as it liked."""
    flags = ("--send-timeout-s", "3", "--max-unsent-mb-per-key", "1")
    with live(tmp_path, *flags) as server:
        port = int(server.url.rsplit(":", 1)[1])
        body = json.dumps(speech(seconds=300)).encode()  # 14 MB of WAV
        sock = non_reading_request(port, body)
        try:
            unread = server.wait_for(
                lambda b: b["connections"]["unread_bytes"] > 2**20, BOUND_S, "an unread answer"
            )["connections"]["unread_bytes"]
            refused = server.request("POST", "/v1/audio/speech", json=speech(), timeout=BOUND_S)
            assert refused.status_code == 429, refused.text
            assert refused.json()["error"]["code"] == "answers_unread"
            assert refused.headers["Retry-After"] == "3"
            server.wait_for(
                lambda b: b["connections"]["unread_bytes"] == 0, BOUND_S, "the client dropped"
            )
        finally:
            sock.close()
        assert unread > 2**20
        assert "took none of its answer" in server.log.read_text()
        answer = server.request("POST", "/v1/audio/speech", json=speech(), timeout=BOUND_S)
        assert answer.status_code == 200, answer.text


def test_answers_made_together_for_non_readers_stay_within_the_keys_cap(tmp_path: Path) -> None:
    """Before: the cap on unread answers was checked only when a request came in, so answers
    made together (asked at once, before any was waiting) all went out: one key held 627 MB
    unread against its 128 MB, and every other key's speech was 429 until the send deadline.
    Now an answer about to start while its key's answers already wait past the cap is a 429."""
    flags = ("--send-timeout-s", "600", "--max-unsent-mb-per-key", "1")
    with live(tmp_path, *flags) as server:
        port = int(server.url.rsplit(":", 1)[1])
        body = json.dumps(speech(seconds=120)).encode()  # 5.8 MB of WAV each
        socks = [non_reading_request(port, body) for _ in range(6)]
        try:
            wait_until(  # uvicorn logs an answer as it starts, its first bytes written with it
                lambda: server.log.read_text().count('"POST /v1/audio/speech HTTP/1.1"') == 6,
                BOUND_S,
                "every answer started",
            )
            unread = server.health()["connections"]["unread_bytes"]
        finally:
            for sock in socks:
                sock.close()
        assert 2**20 < unread < 8 * 2**20, unread  # one answer past the cap, not six


def test_a_websocket_gives_its_connections_place_back_when_it_ends(tmp_path: Path) -> None:
    """A WebSocket upgrade hands the connection to uvicorn's WebSocket protocol: its end must
    still release the place it holds under the caps."""
    with live(tmp_path, "--max-connections-per-peer", "4") as server:
        url = server.url.replace("http://", "ws://") + "/v1/audio/speech/stream"
        for _ in range(6):  # more than the cap, one after the other
            with connect(url, additional_headers={"Authorization": f"Bearer {KEY}"}) as ws:
                ws.send(json.dumps({"type": "session.config", "voice": "alloy"}))
        wait_until(  # one open: the /health request's own
            lambda: server.health()["connections"]["open"] <= 1,
            BOUND_S,
            "the WebSockets' connections to close",
        )
        answer = server.request("POST", "/v1/audio/speech", json=speech(), timeout=BOUND_S)
        assert answer.status_code == 200, answer.text
