"""The edge (issue 36): what a request's head and body must be before anything reads them.

Blank keys from the environment, a body that trickles, a body framed two ways, a JSON route sent
another content type, a Host the server does not answer to, invalid UTF-8 in any field, a full
disk: each against a real server process, the framing and the trickle over raw sockets.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.helpers.live_server import AUTH, KEY, REPO_ROOT, LiveServer, free_port, live, tone_wav
from tests.helpers.tmpfs import fill, mount_tmpfs

BOUND_S = 120.0  # generous bound for anything to happen on a busy 2-core machine
DEADLINE_S = 3  # the module server's --body-deadline-s


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    # The gap between two reads is generous, so only the body's whole deadline can cut it off.
    flags = ("--body-deadline-s", str(DEADLINE_S), "--body-timeout-s", "60")
    with live(tmp_path_factory.mktemp("edge"), *flags) as running:
        yield running


def address(server: LiveServer) -> tuple[str, int]:
    host, port = server.url.removeprefix("http://").split(":")
    return host, int(port)


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (fails after BOUND_S)."""
    sock.settimeout(BOUND_S)
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    return received


# ---------------------------------------------------------------- keys from every source


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("OMNIVOICE_API_KEYS", ", ,"),
        ("OMNIVOICE_API_KEYS", ""),
        ("OMNIVOICE_API_KEYS", "sk-a,,sk-b"),
        ("OMNIVOICE_API_KEY", " "),
    ],
)
def test_blank_keys_in_the_environment_do_not_start_an_open_server(
    variable: str, value: str, tmp_path: Path
) -> None:
    argv = [
        sys.executable,
        "-m",
        "supervisor",
        "serve",
        "--engine",
        "null",
        "--port",
        str(free_port()),
        "--data-dir",
        str(tmp_path),
    ]
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OMNIVOICE_API_KEY")}
    result = subprocess.run(
        argv,
        cwd=REPO_ROOT,
        env={**environ, variable: value},
        capture_output=True,
        text=True,
        timeout=BOUND_S,
    )
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "must not be empty or blank" in lines[0], result.stderr


# ---------------------------------------------------------------- the body's deadline


def test_a_body_sent_a_byte_a_second_is_cut_off_at_its_deadline(server: LiveServer) -> None:
    with socket.create_connection(address(server)) as sock:
        sock.sendall(
            f"POST /v1/audio/speech HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {KEY}\r\n"
            "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n".encode()
        )
        start = time.monotonic()
        sock.settimeout(0.5)  # a byte every half second: never a gap, never the end either
        answer = b""
        while time.monotonic() - start < BOUND_S:
            try:
                sock.sendall(b" ")
                answer = sock.recv(65536)
            except TimeoutError:
                continue
            except (BrokenPipeError, ConnectionResetError):
                break
            break
        answer += read_until_closed(sock)
    took = time.monotonic() - start
    assert answer.startswith(b"HTTP/1.1 408 "), answer
    assert b"connection: close" in answer.lower() and b"request_body_timeout" in answer
    assert DEADLINE_S - 0.5 <= took < BOUND_S
    assert "its whole request body did not arrive within 3 s" in server.log.read_text()


# ---------------------------------------------------------------- framing


def test_content_length_with_transfer_encoding_is_a_400_and_the_connection_closes(
    server: LiveServer,
) -> None:
    body = b'{"input": "Hi", "response_format": "wav"}'
    chunked = f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n"
    with socket.create_connection(address(server)) as sock:
        sock.sendall(
            f"POST /v1/audio/speech HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {KEY}\r\n"
            f"Content-Type: application/json\r\nContent-Length: 5\r\n"
            "Transfer-Encoding: chunked\r\n\r\n".encode()
            + chunked
        )
        answer = read_until_closed(sock)  # returns only once the server has closed
    head = answer.split(b"\r\n\r\n", 1)[0].lower()
    assert head.startswith(b"http/1.1 400 ") and b"connection: close" in head, answer
    assert b'"param":"Transfer-Encoding"' in answer.replace(b" ", b"")


# ---------------------------------------------------------------- content types


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded"])
def test_json_routes_refuse_other_content_types(
    server: LiveServer, content_type: str | None
) -> None:
    """What a page on another site can send without a preflight is never read as JSON."""
    headers = {"Content-Type": content_type} if content_type else {}
    body = b'{"input": "Hi", "response_format": "wav", "items": [{"input": "Hi"}]}'
    for method, path in (
        ("POST", "/v1/audio/speech"),
        ("POST", "/v1/audio/speech/captioned"),
        ("POST", "/v1/jobs"),
        ("PUT", "/v1/audio/lexicons/names"),
    ):
        answer = server.request(method, path, content=body, headers=headers)
        assert answer.status_code == 415, (path, answer.text)
        assert answer.json()["error"]["code"] == "unsupported_media_type"
    sent = server.request(
        "POST", "/v1/audio/speech", json={"input": "Hi", "response_format": "wav"}
    )
    assert sent.status_code == 200


# ---------------------------------------------------------------- Host


def test_only_the_allowed_hosts_are_answered(server: LiveServer) -> None:
    _, port = address(server)
    for host in (
        "localhost",
        f"localhost:{port}",
        f"127.0.0.1:{port}",
        f"[::1]:{port}",
        "LOCALHOST.",
    ):
        assert server.request("GET", "/v1/models", headers={"Host": host}).status_code == 200, host
    for host in (
        "evil.example",
        f"evil.example:{port}",
        "127.0.0.1.evil.example",
        "localhost.evil",
        "[::1]evil.example",  # before: only the text up to "]" was read
        f"[::1]:{port}evil",
        "[::1",
    ):
        answer = server.request("GET", "/v1/models", headers={"Host": host})
        assert answer.status_code == 400, host
        assert answer.json()["error"] | {"message": ""} == {
            "message": "",
            "type": "invalid_request_error",
            "param": "Host",
            "code": "host_not_allowed",
        }
    # The probes answer any Host (a kubelet sends the pod's IP), with their open view only.
    for path in ("/health", "/ready"):
        probe = server.request("GET", path, headers={"Host": "10.1.2.3:9194"})
        assert probe.status_code == 200, probe.text
    assert (
        "settings" not in server.request("GET", "/health", headers={"Host": "evil.example"}).json()
    )
    assert "settings" in server.request("GET", "/health").json()
    assert httpx.get(server.url + "/console", timeout=10).status_code == 200


def test_on_a_wider_address_any_host_is_answered_unless_allowed_hosts_says(tmp_path: Path) -> None:
    (tmp_path / "any").mkdir()
    (tmp_path / "named").mkdir()
    with live(tmp_path / "any", "--host", "0.0.0.0") as server:
        assert (
            server.request("GET", "/v1/models", headers={"Host": "tts.example"}).status_code == 200
        )
    with live(
        tmp_path / "named",
        "--host",
        "0.0.0.0",
        "--allowed-hosts",
        "tts.example",
        "--allowed-hosts",
        "127.0.0.1",
    ) as server:
        assert (
            server.request("GET", "/v1/models", headers={"Host": "tts.example:80"}).status_code
            == 200
        )
        assert (
            server.request("GET", "/v1/models", headers={"Host": "other.example"}).status_code
            == 400
        )
        assert server.request("GET", "/v1/models", headers=AUTH).status_code == 200


# ---------------------------------------------------------------- invalid UTF-8


def multipart(
    fields: dict[str, bytes], file_key: str | None = None
) -> tuple[bytes, dict[str, str]]:
    """A multipart body by hand (a client library would encode the text itself)."""
    parts = [
        b'--b\r\nContent-Disposition: form-data; name="%s"\r\n\r\n%s\r\n' % (k.encode(), v)
        for k, v in fields.items()
    ]
    if file_key:
        parts.append(
            b'--b\r\nContent-Disposition: form-data; name="%s"; filename="a.wav"\r\n'
            b"Content-Type: audio/wav\r\n\r\n%s\r\n" % (file_key.encode(), tone_wav(1.0))
        )
    return b"".join(parts) + b"--b--\r\n", {"Content-Type": "multipart/form-data; boundary=b"}


BAD = b"caf\xe9 \xff"  # Latin-1 bytes sent as UTF-8: Starlette read them as Latin-1 text


@pytest.mark.parametrize(
    ("path", "fields", "file_key", "param"),
    [
        (
            "/v1/audio/voices",
            {"name": b"v1", "type": b"audio_sample", "transcript": BAD},
            "audio_sample",
            "transcript",
        ),
        ("/v1/audio/voices", {"name": BAD, "type": b"audio_sample"}, "audio_sample", "name"),
        ("/v1/audio/clone", {"input": BAD, "transcript": b"Hello."}, "file", "input"),
        ("/v1/audio/clone", {"input": b"Hi.", "transcript": BAD}, "file", "transcript"),
        ("/v1/audio/design", {"input": BAD, "instructions": b"female"}, None, "input"),
        ("/v1/audio/design", {"input": b"Hi.", "instructions": BAD}, None, "instructions"),
    ],
)
def test_invalid_utf8_in_a_form_field_is_a_400_naming_it(
    server: LiveServer, path: str, fields: dict[str, bytes], file_key: str | None, param: str
) -> None:
    body, headers = multipart(fields, file_key)
    answer = server.request("POST", path, content=body, headers=headers)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"] | {"message": ""} == {
        "message": "",
        "type": "invalid_request_error",
        "param": param,
        "code": "invalid_text",
    }


def test_invalid_utf8_anywhere_else_is_a_400(server: LiveServer) -> None:
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    design = server.request(
        "POST", "/v1/audio/design", content=b"input=caf%E9&instructions=female", headers=form
    )
    assert design.status_code == 400 and design.json()["error"]["param"] == "input", design.text
    as_json = {"Content-Type": "application/json"}
    for method, path, body in (
        ("POST", "/v1/audio/speech", b'{"input": "' + BAD + b'"}'),
        ("POST", "/v1/audio/speech/captioned", b'{"input": "' + BAD + b'"}'),
        ("POST", "/v1/jobs", b'{"items": [{"input": "' + BAD + b'"}]}'),
        (
            "PUT",
            "/v1/audio/lexicons/names",
            b'{"language": "en", "entries": {"' + BAD + b'": "x"}}',
        ),
    ):
        answer = server.request(method, path, content=body, headers=as_json)
        assert answer.status_code == 400, (path, answer.text)
    for path, param in (
        ("/v1/audio/lexicons/caf%E9", "path"),
        ("/v1/jobs?after=caf%E9", "query"),
        ("/v1/audio/voices/%FF", "path"),
    ):
        answer = server.request("GET", path)
        assert answer.status_code == 400 and answer.json()["error"]["param"] == param, answer.text
    # Valid UTF-8 in a form still passes.
    body, headers = multipart({"input": "Café, über.".encode(), "instructions": b"female"})
    assert (
        server.request("POST", "/v1/audio/design", content=body, headers=headers).status_code == 200
    )


def raw_status(server: LiveServer, head: bytes) -> tuple[int, bytes]:
    """A request written byte for byte (headers httpx would not send); its status and body."""
    with socket.create_connection(address(server), timeout=BOUND_S) as sock:
        sock.sendall(head + b"Connection: close\r\nContent-Length: 0\r\n\r\n")
        answer = read_until_closed(sock)
    status_line, _, rest = answer.partition(b"\r\n")
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2]


def test_headers_read_twice_or_not_utf8_are_a_400(server: LiveServer) -> None:
    """Before: of two Idempotency-Key headers the first was taken silently, and bytes that are
    not UTF-8 were read as Latin-1."""
    start = f"POST /v1/jobs HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {KEY}\r\n"
    json_type = b"Content-Type: application/json\r\n"
    for extra, param in (
        (json_type + b"Idempotency-Key: a\r\nIdempotency-Key: b\r\n", "Idempotency-Key"),
        (json_type + b"Idempotency-Key: caf\xe9\r\n", "Idempotency-Key"),
        (b"Content-Type: application/json; charset=\xff\r\n", "Content-Type"),
        (json_type + json_type, "Content-Type"),
    ):
        status, body = raw_status(server, start.encode() + extra)
        assert status == 400, (extra, body)
        assert json.loads(body)["error"]["param"] == param, body
    # One Idempotency-Key in UTF-8 (beyond ASCII) still passes the edge.
    status, body = raw_status(
        server, start.encode() + json_type + "Idempotency-Key: café\r\n".encode()
    )
    assert status == 400 and json.loads(body)["error"]["param"] != "Idempotency-Key", body


# ---------------------------------------------------------------- a full disk


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs as the data directory: a disk that really fills up."""
    with mount_tmpfs(tmp_path / "data", "2m") as mount:
        yield mount


def test_a_full_disk_is_a_507_on_every_route_that_writes(tmp_path: Path, tiny_disk: Path) -> None:
    lexicon = {"language": "en", "entries": {"OmniVoice": "omni voice"}}
    with live(tmp_path) as server:
        filler = fill(tiny_disk)
        body, headers = multipart(
            {"name": b"full", "type": b"audio_sample", "transcript": b"Hi."}, "audio_sample"
        )
        refused = {
            "lexicon": server.request("PUT", "/v1/audio/lexicons/names", json=lexicon),
            "voice": server.request("POST", "/v1/audio/voices", content=body, headers=headers),
            "job": server.request(
                "POST", "/v1/jobs", json={"items": [{"input": "x" * 2000}] * 200}
            ),
        }
        for route, answer in refused.items():
            assert answer.status_code == 507, (route, answer.text)
            assert (
                answer.json()["error"]["code"] == "insufficient_storage"
                and "Retry-After" in answer.headers
            )
        # Speech writes nothing it cannot do without: the cache's write fails quietly.
        speech = server.request(
            "POST", "/v1/audio/speech", json={"input": "Still here.", "seed": 3}
        )
        assert speech.status_code == 200, speech.text
        filler.unlink()
        assert server.request("PUT", "/v1/audio/lexicons/names", json=lexicon).status_code == 201
        assert server.request("GET", "/v1/audio/voices/full").status_code == 404
        log = server.log.read_text()
    assert "Traceback" not in log


def test_a_browsers_cross_site_post_is_refused(server: LiveServer) -> None:
    """A form a page elsewhere posts to a keyless server on loopback (multipart needs no
    preflight): refused by the browser's own Sec-Fetch-Site, whatever the route."""
    body, headers = multipart({"input": b"Hi.", "instructions": b"female"})
    for site in ("cross-site", "same-site"):
        answer = server.request(
            "POST",
            "/v1/audio/design",
            content=body,
            auth=False,
            headers={**headers, "Sec-Fetch-Site": site},
        )
        assert answer.status_code == 403, answer.text
        assert answer.json()["error"]["code"] == "cross_site_request"
    same = server.request(
        "POST",
        "/v1/audio/design",
        content=body,
        headers={**headers, "Sec-Fetch-Site": "same-origin"},
    )
    assert same.status_code == 200, same.text
    # A link from elsewhere still opens the console.
    page = httpx.get(server.url + "/console", headers={"Sec-Fetch-Site": "cross-site"}, timeout=10)
    assert page.status_code == 200
