"""The findings of issue 13's adversarial probe, each replayed against a real server process.

Most tests share one server (the null engine: the attacks are on the HTTP side, and silence is
the cheapest audio); those that need their own flags or data directory start their own.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers.job_helpers import ended, submit, wait_job
from tests.helpers.live_server import KEY, REPO_ROOT, LiveServer, free_port, live
from tests.helpers.tmpfs import fill, mount_tmpfs
from tests.helpers.waits import wait_until

BOUND_S = 120.0  # generous bound for anything to happen on a busy 2-core machine


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live(
        tmp_path_factory.mktemp("harden"),
        "--header-timeout-s",
        "2",
        "--body-timeout-s",
        "2",
        faults=True,
    ) as running:
        yield running


def speech(text: str) -> dict[str, Any]:
    return {"model": "tts-1", "input": text, "voice": "alloy", "response_format": "wav"}


def post_raw(server: LiveServer, path: str, body: bytes) -> httpx.Response:
    return server.request(
        "POST", path, content=body, headers={"Content-Type": "application/json"}, timeout=BOUND_S
    )


# ---------------------------------------------------------------- 1. text that cannot be encoded


def test_lone_surrogates_are_a_400_and_requests_alongside_all_answer(server: LiveServer) -> None:
    """Before: the bad request passed validation, its batch failed to encode and was dropped, and
    every request batched with it hung for ever."""
    bad = {
        "escape": (
            "/v1/audio/speech",
            json.dumps(speech("\ud800 hi")).encode(),
        ),  # json.dumps writes \ud800
        "cesu8": (
            "/v1/audio/speech",
            json.dumps(speech("XX hi")).encode().replace(b"XX", b"\xed\xa0\x80"),
        ),
        "design": (
            "/v1/audio/design",
            json.dumps({"input": "hi", "instructions": "female, \udfff"}).encode(),
        ),
        "job": (
            "/v1/jobs",
            json.dumps({"items": [speech("fine"), speech("\udc00 not fine")]}).encode(),
        ),
    }
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        innocent = [
            pool.submit(
                server.request,
                "POST",
                "/v1/audio/speech",
                json=speech(f"Innocent number {i}."),
                timeout=BOUND_S,
            )
            for i in range(8)
        ]
        refused = {
            name: pool.submit(post_raw, server, path, body) for name, (path, body) in bad.items()
        }
        for name, future in refused.items():
            answer = future.result()
            assert answer.status_code == 400, (name, answer.text)
            assert answer.json()["error"]["code"] == "invalid_text"
        assert all(f.result().status_code == 200 for f in innocent)
    assert refused["job"].result().json()["error"]["param"] == "items[1].input"
    assert refused["escape"].result().json()["error"]["param"] == "input"
    # A form cannot carry a surrogate (its bytes are decoded strictly, else as Latin-1): the raw
    # CESU-8 bytes in a voice's name are an ordinary bad name, a 400, never a 500.
    form = (
        b'--b\r\nContent-Disposition: form-data; name="name"\r\n\r\nv\xed\xa0\x80\r\n'
        b'--b\r\nContent-Disposition: form-data; name="type"\r\n\r\nprompt\r\n--b--\r\n'
    )
    voice = server.request(
        "POST",
        "/v1/audio/voices",
        content=form,
        headers={"Content-Type": "multipart/form-data; boundary=b"},
    )
    assert voice.status_code == 400 and voice.json()["error"]["param"] == "name", voice.text


# ---------------------------------------------------------------- 2. metric labels


def test_invented_methods_and_paths_add_no_metric_series(server: LiveServer) -> None:
    for i in range(30):
        httpx.request(f"INVENTED{i}", server.url + f"/no/such/path/{i}", timeout=10)
    text = server.request("GET", "/metrics").text
    assert "INVENTED" not in text and "/no/such/path" not in text
    assert 'method="other"' in text and 'route="unmatched"' in text


# ---------------------------------------------------------------- 4. test faults


def test_a_fault_token_outside_the_fault_directory_deletes_nothing(
    server: LiveServer, tmp_path: Path
) -> None:
    victim = tmp_path / "precious.txt"
    victim.write_text("keep me")
    answer = server.request(
        "POST", "/v1/audio/speech", json=speech(f"Hello. [[fault:slow:0@{victim}]]")
    )
    assert answer.status_code == 200 and victim.read_text() == "keep me"
    # A way out of the fault directory through `..` is refused the same way.
    fault_dir = (
        Path(server.request("GET", "/health").json()["settings"]["data_dir"]) / "test-faults"
    )
    sneaky = fault_dir / ".." / ".." / victim.relative_to(victim.anchor)
    assert (
        server.request(
            "POST", "/v1/audio/speech", json=speech(f"Hi. [[fault:slow:0@{sneaky}]]")
        ).status_code
        == 200
    )
    assert victim.exists()
    # The control: a token inside the directory is consumed (so the marker was honoured at all).
    token = fault_dir / "once"
    token.touch()
    assert (
        server.request(
            "POST", "/v1/audio/speech", json=speech(f"Hey. [[fault:slow:0@{token}]]")
        ).status_code
        == 200
    )
    assert not token.exists()


def serve_argv(*flags: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "supervisor",
        "serve",
        "--engine",
        "null",
        "--port",
        str(free_port()),
        *flags,
    ]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--api-key", ""), "must not be empty"),
        (("--api-key", "sk-fine", "--api-key", "  "), "must not be empty"),
        (("--callback-allow", "hooks.example.com"), "--callback-allow needs --callback-secret"),
    ],
)
def test_the_server_refuses_to_start(flags: tuple[str, ...], message: str, tmp_path: Path) -> None:
    result = subprocess.run(
        serve_argv("--data-dir", str(tmp_path), *flags),
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=BOUND_S,
    )
    assert result.returncode != 0 and message in result.stderr, result.stderr


# ---------------------------------------------------------------- 9. auth, health, slow clients


def test_health_without_a_key_shows_states_and_counts_only(server: LiveServer) -> None:
    open_view = httpx.get(server.url + "/health", timeout=10).json()
    assert "settings" not in open_view
    assert str(server.log.parent) not in json.dumps(open_view)
    sidecar = open_view["sidecars"][0]
    assert sidecar["pid"] is None and {
        "id",
        "device",
        "state",
        "restarts",
        "kills",
        "last_error",
    } <= set(sidecar)
    assert open_view["status"] == "ok" and open_view["jobs"]["state"] == "ok"
    keyed = server.request("GET", "/health").json()
    assert keyed["settings"]["data_dir"] and keyed["sidecars"][0]["pid"]
    wrong = httpx.get(
        server.url + "/health", headers={"Authorization": "Bearer nope"}, timeout=10
    ).json()
    assert "settings" not in wrong


def test_two_authorization_headers_are_refused(server: LiveServer) -> None:
    headers = [("Authorization", "Bearer wrong"), ("Authorization", f"Bearer {KEY}")]
    for path in ("/v1/models", "/health"):
        answer = httpx.get(server.url + path, headers=headers, timeout=10)
        assert answer.status_code == 400 and answer.json()["error"]["param"] == "Authorization"


def closed_by_server(sock: socket.socket, trickle: bytes) -> bool:
    """Send `trickle` a byte at a time until the server closes the connection (True) or BOUND_S passes."""
    sock.settimeout(0.2)
    deadline = time.monotonic() + BOUND_S
    for byte in (trickle[i : i + 1] for i in range(len(trickle))):
        if time.monotonic() > deadline:
            return False
        try:
            sock.sendall(byte)
            if sock.recv(4096) == b"":
                return True
        except TimeoutError:
            continue
        except (BrokenPipeError, ConnectionResetError):
            return True
    return False


def test_slow_loris_headers_and_bodies_are_cut_off(server: LiveServer) -> None:
    host, port = server.url.removeprefix("http://").split(":")
    endless_headers = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"X-Slow: " + b"a" * 100_000
    with socket.create_connection((host, int(port))) as sock:
        assert closed_by_server(
            sock, endless_headers
        )  # 2 s header deadline, however the bytes trickle
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(
            f"POST /v1/audio/speech HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {KEY}\r\n"
            'Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"input"'.encode()
        )
        sock.settimeout(BOUND_S)
        answer = b""
        while chunk := sock.recv(4096):  # the body stalls: 408, closed after the 2 s gap
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 408 ") and b"request_body_timeout" in answer, answer
    assert "did not arrive within 2 s" in server.log.read_text()


def test_a_client_gone_mid_body_is_one_line_not_a_500(server: LiveServer) -> None:
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(
            f"POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {KEY}\r\n"
            'Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"items": ['.encode()
        )
        time.sleep(0.3)  # the client pauses mid-body (the handler's reading shows nowhere)
    wait_until(
        lambda: "disconnected before its request body" in server.log.read_text(),
        BOUND_S,
        "the server to log the client gone",
    )
    log = server.log.read_text()
    assert "Traceback" not in log and "unhandled error" not in log


def test_the_same_idempotency_key_with_speed_1_and_1_0_is_the_same_job(server: LiveServer) -> None:
    first = server.request(
        "POST",
        "/v1/jobs",
        json={"items": [{**speech("Same."), "speed": 1}]},
        headers={"Idempotency-Key": "speed-spelling"},
    )
    again = server.request(
        "POST",
        "/v1/jobs",
        content=b'{"items": [{"model": "tts-1", "input": "Same.", "voice": "alloy", '
        b'"response_format": "wav", "speed": 1.0}]}',
        headers={"Idempotency-Key": "speed-spelling", "Content-Type": "application/json"},
    )
    assert first.status_code == 202 and again.status_code == 202, again.text
    assert (
        again.json()["id"] == first.json()["id"] and again.headers["Idempotent-Replayed"] == "true"
    )
    other = server.request(
        "POST",
        "/v1/jobs",
        json={"items": [{**speech("Same."), "speed": 1.5}]},
        headers={"Idempotency-Key": "speed-spelling"},
    )
    assert other.status_code == 409


def test_api_keys_from_a_file(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.write_text("# our clients\nsk-from-file\n\nsk-second\n")
    with live(tmp_path, "--api-key-file", str(keys)) as server:
        for key in ("sk-from-file", "sk-second", KEY):
            assert (
                server.request(
                    "GET", "/v1/models", auth=False, headers={"Authorization": f"Bearer {key}"}
                ).status_code
                == 200
            )
        assert (
            server.request(
                "GET", "/v1/models", auth=False, headers={"Authorization": "Bearer sk-other"}
            ).status_code
            == 401
        )


def test_synth_gives_its_embedded_server_the_key_through_the_environment(
    checkpoint_dir: Path, tmp_path: Path
) -> None:
    from supervisor.commands.embedded_server import EmbeddedServer

    with (tmp_path / "synth.log").open("w") as log:
        embedded = EmbeddedServer(str(checkpoint_dir), tmp_path / "data", log)
        try:
            url, key = embedded.start()
            assert embedded.proc is not None
            argv = Path(f"/proc/{embedded.proc.pid}/cmdline").read_bytes().split(b"\0")
            assert key.encode() not in argv and b"--api-key" not in argv
            assert (
                httpx.get(
                    url + "/v1/models", headers={"Authorization": f"Bearer {key}"}, timeout=10
                ).status_code
                == 200
            )
            assert httpx.get(url + "/v1/models", timeout=10).status_code == 401
        finally:
            embedded.stop()


# ---------------------------------------------------------------- 7. a damaged job database


def test_a_damaged_job_database_is_reported_and_speech_carries_on(tmp_path: Path) -> None:
    from supervisor.jobs.sqlite_schema import DB_NAME
    from supervisor.jobs.sqlite_store import SqliteJobStore
    from supervisor.jobs.storage import NewItem

    data = tmp_path / "data"
    store = SqliteJobStore(data)
    store.create([NewItem({"input": f"item {i} " * 40}, None, "wav") for i in range(300)], "sha")
    store.close()
    with sqlite3.connect(data / DB_NAME) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    damaged = bytearray((data / DB_NAME).read_bytes())
    damaged[4096 * 2 : 4096 * 4] = b"\x5a" * 8192  # two pages of the items table overwritten
    (data / DB_NAME).write_bytes(bytes(damaged))
    with live(tmp_path) as server:
        health = server.health()
        assert (
            health["status"] == "ok"
            and health["jobs"]["state"] == "corrupt"
            and "damaged" in health["jobs"]["error"]
        )
        assert (
            server.request("POST", "/v1/audio/speech", json=speech("Still speaking.")).status_code
            == 200
        )
        for method, path in (("GET", "/v1/jobs"), ("POST", "/v1/jobs")):
            answer = server.request(method, path, json={"items": [speech("x")]})
            assert (
                answer.status_code == 503 and answer.json()["error"]["code"] == "job_store_corrupt"
            )


# ---------------------------------------------------------------- 8. big bodies off the event loop


def test_health_answers_while_a_big_body_is_parsed(server: LiveServer) -> None:
    """A job body of 10,000 items of 3,000 characters (30 MB; the last item invalid, so nothing
    runs) takes a while to parse and check. /health must answer meanwhile: the body goes out but
    for its last byte, then that byte, and /health is asked until the job's answer comes. Before,
    json.loads and the checks ran on the event loop: no /health got in before the 400."""
    items = [speech(f"{i} " + "x" * 3000) for i in range(9_999)] + [
        {**speech("Too fast."), "speed": 99}
    ]
    body = json.dumps({"items": items}).encode()
    host, port = server.url.removeprefix("http://").split(":")
    answered_meanwhile: list[int] = []
    with (
        socket.create_connection((host, int(port))) as sock,
        httpx.Client(timeout=BOUND_S) as client,
    ):
        sock.sendall(
            f"POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {KEY}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body[:-1]
        )
        assert client.get(server.url + "/health").status_code == 200
        sock.sendall(body[-1:])
        sock.settimeout(0.01)
        deadline = time.monotonic() + BOUND_S
        answer = b""
        while not answer and time.monotonic() < deadline:
            with contextlib.suppress(TimeoutError):
                answer = sock.recv(4096)
            if not answer:
                answered_meanwhile.append(client.get(server.url + "/health").status_code)
        sock.settimeout(BOUND_S)
        while not answer.endswith(b"}"):  # the headers and the body may come apart
            answer += sock.recv(4096)
    assert answer.startswith(b"HTTP/1.1 400") and b"items[9999].speed" in answer
    assert len(answered_meanwhile) >= 3 and set(answered_meanwhile) == {200}, answered_meanwhile


def test_a_job_body_of_millions_of_tiny_items_is_refused_at_the_item_limit(
    server: LiveServer,
) -> None:
    body = b'{"items": [' + b"{}," * 5_000_000 + b"{}]}"  # 15 MB; json.loads would build 5 M dicts
    answer = post_raw(server, "/v1/jobs", body)
    assert answer.status_code == 400 and "at most 10000 items" in answer.json()["error"]["message"]


# ---------------------------------------------------------------- 3. a full disk


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs as the data directory: a disk that really fills up."""
    with mount_tmpfs(tmp_path / "data", "2m") as mount:
        yield mount


def test_a_full_disk_sends_items_back_to_the_queue_and_they_run_when_space_returns(
    checkpoint_dir: Path, tmp_path: Path, tiny_disk: Path
) -> None:
    with live(tmp_path, checkpoint=checkpoint_dir, faults=True) as server:
        slow = [
            {**speech(f"Written to a full disk, number {i}. [[fault:slow:4]]")} for i in range(2)
        ]
        first = submit(server, slow)
        # Fill the disk only once both items run (an item not yet started waits for the disk).
        wait_job(
            server,
            first["id"],
            lambda body: body["progress"]["running"] == 2,
            BOUND_S,
            "both items to run",
        )
        filler = fill(tiny_disk)
        big = [speech("A long item that needs room in the database. " * 80) for _ in range(100)]
        refused = server.request("POST", "/v1/jobs", json={"items": big})
        assert (
            refused.status_code == 507 and refused.json()["error"]["code"] == "insufficient_storage"
        ), refused.text
        # The items finished and met the full disk: back in the queue, the job waiting for space
        # (one may have been written meanwhile, in room another's failed write gave back).
        held = wait_job(
            server,
            first["id"],
            lambda b: b["waiting_for_space"] is not None and b["progress"]["running"] == 0,
            BOUND_S,
            "the items back in the queue",
        )
        assert held["progress"]["queued"] >= 1 and held["progress"]["failed"] == 0
        filler.unlink()
        body = wait_job(server, first["id"], ended, BOUND_S, "the items to run again")
        assert [i["state"] for i in body["items"]] == ["done", "done"]
        assert max(i["attempts"] for i in body["items"]) == 2
        assert not list(tiny_disk.rglob("*.tmp"))
        # Space is back: a new job is stored and runs, without a restart.
        again = submit(server, [speech("After the disk was freed.")])
        done = wait_job(server, again["id"], ended, BOUND_S, "the job after the disk was freed")
        assert [i["state"] for i in done["items"]] == ["done"]
        log = server.log.read_text()
    assert "Traceback" not in log and log.count("cannot be written") <= 3
