"""Single flight (issue 36): identical reproducible requests in flight are made once, and so
are identical job items (the runner holds one back while its twin is made).

The sidecar is SIGSTOPped while the requests arrive, so that they are all in flight at once
whatever the machine's load; what was generated is read from the server's own counters
(`omnivoice_batch_size_sum`: tasks sent to sidecars), not from timing.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import re
import signal
import socket
from collections.abc import Iterator

import httpx
import pytest

from tests.helpers.job_helpers import ended, submit, wait_job
from tests.helpers.live_server import KEY, LiveServer, live
from tests.helpers.waits import wait_until

BOUND_S = 120.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live(tmp_path_factory.mktemp("flight")) as running:
        yield running


def counters(server: LiveServer) -> dict[str, float]:
    wanted = {
        "omnivoice_batch_size_sum": "tasks",
        "omnivoice_single_flight_waiting": "waiting",
        "omnivoice_single_flight_shared_total": "shared",
        'omnivoice_queue_depth{stage="unfinished"}': "queue",
    }
    out = dict.fromkeys(wanted.values(), 0.0)
    for line in server.request("GET", "/metrics").text.splitlines():
        match = re.fullmatch(r"([a-z_]+)(\{[^}]*\})? ([0-9.e+]+)", line)
        if match is None:
            continue
        name = match[1] if match[1] in wanted else f"{match[1]}{match[2] or ''}"
        if name in wanted:
            out[wanted[name]] += float(match[3])
    return out


def wait_exactly(server: LiveServer, name: str, value: float) -> None:
    wait_until(lambda: counters(server)[name] == value, BOUND_S, f"{name} to reach {value}")


def wait_at_least(server: LiveServer, name: str, value: float) -> None:
    wait_until(lambda: counters(server)[name] >= value, BOUND_S, f"{name} to reach {value}")


@contextlib.contextmanager
def stopped_sidecar(server: LiveServer) -> Iterator[None]:
    pid = server.health()["sidecars"][0]["pid"]
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def speech(text: str) -> dict[str, object]:
    return {"input": text, "seed": 7, "response_format": "wav"}


def post(server: LiveServer, body: dict[str, object]) -> httpx.Response:
    return server.request("POST", "/v1/audio/speech", json=body, timeout=BOUND_S)


def test_ten_identical_seeded_requests_make_one_generation(server: LiveServer) -> None:
    body = speech("Ten of us asked for the same thing at the same moment.")
    before = counters(server)
    with concurrent.futures.ThreadPoolExecutor(10) as pool:
        with stopped_sidecar(server):
            first = pool.submit(post, server, body)
            wait_exactly(server, "queue", before["queue"] + 1)  # the first leads: its task is in
            rest = [pool.submit(post, server, body) for _ in range(9)]
            wait_exactly(server, "waiting", 9)  # the nine wait for it, nothing of theirs queued
            assert counters(server)["queue"] == before["queue"] + 1
        answers = [first.result(), *(f.result() for f in rest)]
    assert all(a.status_code == 200 for a in answers), [a.text for a in answers]
    assert len({a.content for a in answers}) == 1
    assert [a.headers["X-Cache"] for a in answers] == ["miss"] + ["hit"] * 9
    after = counters(server)
    assert after["tasks"] - before["tasks"] == 1 and after["shared"] - before["shared"] == 9
    assert after["waiting"] == 0


def test_a_leader_that_leaves_hands_the_work_to_a_waiter(server: LiveServer) -> None:
    """The leader's client disconnects while the sidecar is stopped: the waiters do not hang and
    do not inherit its end; one of them makes the audio and the others share it."""
    body = speech("The first of us gave up; the others still wanted it.")
    raw = httpx.Request(
        "POST",
        server.url + "/v1/audio/speech",
        json=body,
        headers={"Authorization": f"Bearer {KEY}"},
    )
    head = "POST /v1/audio/speech HTTP/1.1\r\nHost: 127.0.0.1\r\n" + "".join(
        f"{k}: {v}\r\n" for k, v in raw.headers.items() if k.lower() != "host"
    )
    before = counters(server)
    host, port = server.url.removeprefix("http://").split(":")
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        with (
            stopped_sidecar(server),
            socket.create_connection((host, int(port))) as leader,  # closed on a failure too
        ):
            leader.sendall(head.encode() + b"\r\n" + raw.read())
            wait_exactly(server, "queue", before["queue"] + 1)
            rest = [pool.submit(post, server, body) for _ in range(8)]
            wait_exactly(server, "waiting", 8)
            leader.close()  # the leader's client leaves: a waiter leads, the other seven wait on
            wait_exactly(server, "waiting", 7)
        answers = [f.result() for f in rest]
    assert all(a.status_code == 200 for a in answers), [a.text for a in answers]
    assert sorted(a.headers["X-Cache"] for a in answers) == ["hit"] * 7 + ["miss"]
    assert counters(server)["shared"] - before["shared"] == 7
    assert "Traceback" not in server.log.read_text()


def test_unseeded_and_different_requests_are_not_held_back(server: LiveServer) -> None:
    """Only identical reproducible requests share: the others are each made."""
    before = counters(server)
    bodies = [speech("One."), speech("Two."), {"input": "One.", "response_format": "wav"}]
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        answers = list(pool.map(lambda b: post(server, b), bodies))
    assert all(a.status_code == 200 for a in answers)
    assert counters(server)["tasks"] - before["tasks"] == 3


def test_identical_job_items_in_flight_are_made_once(server: LiveServer) -> None:
    """Two jobs, the first with the same seeded item twice: the item is made once and the other
    two are written from the cache; the different items are each made."""
    same = {"input": "Every job asked for this one line.", "seed": 11, "response_format": "wav"}
    before = counters(server)
    with stopped_sidecar(server):
        first = submit(server, [same, same, {**same, "input": "The first job's own line."}])
        # the pass that admits the first job's own line has looked at the twin (held back)
        wait_at_least(server, "queue", before["queue"] + 2)
        second = submit(server, [same, {**same, "input": "The second job's own line."}])
        wait_at_least(server, "queue", before["queue"] + 3)  # and at the second job's copy
    jobs = [wait_job(server, j["id"], ended, BOUND_S, "the job to end") for j in (first, second)]
    assert [j["state"] for j in jobs] == ["completed", "completed"], jobs
    assert counters(server)["tasks"] - before["tasks"] == 3  # not 5: the twins were not made
    audio = {
        server.request("GET", f"/v1/jobs/{j['id']}/items/{n}/audio").content
        for j, n in ((first, 0), (first, 1), (second, 0))
    }
    assert len(audio) == 1
