"""Many servers on one PostgreSQL database (issue 21): a shared job queue, leases, failover.

Three real servers (each with its own CPU sidecar on the tiny checkpoint) share a fresh database
on the session's real PostgreSQL server (tests/helpers/pg_cluster.py). A 300-item job is sent to one of
them; one server is SIGKILLed while it holds items, another's database connections are cut with
`pg_terminate_backend`. Every item must end done exactly once, every result must decode, and the
job must read the same through every live server.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.helpers.job_helpers import decoded_seconds, ended, job, submit, wait_gone, wait_job
from tests.helpers.live_server import LiveServer, live
from tests.helpers.pg_cluster import Cluster
from tests.helpers.waits import wait_until

ITEMS = 300
LEASE_S = 5  # short: the killed server's items run elsewhere within seconds
SENTENCES = [
    "The 6:15 to Brighton is delayed by ten minutes.",
    "Please stand clear of the closing doors.",
    "The museum will close in fifteen minutes.",
]
FORMATS = ["wav", "mp3", "flac"]

pytestmark = pytest.mark.slow


def owner_prefix(server: LiveServer) -> str:
    """The start of a server's application_name, as supervisor.http.app names its connections."""
    return f"omnivoice {socket.gethostname()} port {server.url.rsplit(':', 1)[1]}"


def query(url: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql, params).fetchall()


@contextlib.contextmanager
def servers(
    count: int, url: str, root: Path, checkpoint: Path, *flags: str
) -> Iterator[list[LiveServer]]:
    with contextlib.ExitStack() as stack:
        started = []
        for index in range(count):
            folder = root / f"server-{index}"
            folder.mkdir()
            started.append(
                stack.enter_context(live(folder, "--store", url, *flags, checkpoint=checkpoint))
            )
        yield started


def owned(server: LiveServer) -> str:
    """A LIKE pattern for the server's name in lease_owner and finished_by."""
    return owner_prefix(server).removeprefix("omnivoice ") + " %"


def running_for(url: str, server: LiveServer) -> int:
    sql = "SELECT COUNT(*) FROM items WHERE state = 'running' AND lease_owner LIKE %s"
    return int(query(url, sql, owned(server))[0][0])


def finished_by(url: str, server: LiveServer) -> int:
    sql = "SELECT COUNT(*) FROM items WHERE finished_by LIKE %s"
    return int(query(url, sql, owned(server))[0][0])


def test_three_servers_share_a_job_through_a_kill_and_a_cut_connection(
    pg_cluster: Cluster, checkpoint_dir: Path, tmp_path: Path
) -> None:
    url = pg_cluster.new_database()
    # No result cache: the items repeat three texts, and a server answering them from its own
    # cache would finish them at once (it might hold none when it is killed).
    flags = ("--lease-s", str(LEASE_S), "--max-batch-size", "8", "--cache-max-bytes", "0")
    with servers(3, url, tmp_path, checkpoint_dir, *flags) as (a, b, c):
        items = [
            {"id": f"n{i:03d}", "input": SENTENCES[i % 3], "response_format": FORMATS[i % 3]}
            for i in range(ITEMS)
        ]
        job_id = submit(a, items)["id"]
        # Each server takes a share of the one queue; B is killed while it holds items.
        wait_until(lambda: finished_by(url, b) > 0 and running_for(url, b) > 0, 300, "B to work")
        wait_until(lambda: finished_by(url, c) > 0, 300, "C to finish items")
        sidecars = [s["pid"] for s in b.health()["sidecars"] if s["pid"]]
        killed_at = time.monotonic()
        b.proc.send_signal(signal.SIGKILL)
        b.proc.wait(30)
        # What B held as it died (its leases last seconds more: nobody has taken them yet).
        held_by_b = query(
            url,
            "SELECT job_id, n FROM items WHERE state = 'running' AND lease_owner LIKE %s",
            owned(b),
        )
        assert held_by_b, "B held no item when it was killed"
        wait_gone(sidecars)
        # C's connections cut by the database: C carries on on fresh ones.
        done_by_c = finished_by(url, c)
        assert pg_cluster.terminate(owner_prefix(c)) >= 1
        final = wait_job(a, job_id, ended, 900, "the job to end")
        ended_after_kill_s = time.monotonic() - killed_at
        assert final["state"] == "completed", final["progress"]
        assert final["progress"]["done"] == ITEMS
        assert finished_by(url, c) > done_by_c, "C stopped working after its connections were cut"
        # Exactly once: one result per item, each item finished by one server; the items B held
        # when it died were run again elsewhere.
        assert query(url, "SELECT COUNT(*), COUNT(DISTINCT (job_id, n)) FROM results") == [
            (ITEMS, ITEMS)
        ]
        assert query(url, "SELECT COUNT(*) FROM items WHERE finished_by IS NULL") == [(0,)]
        again = query(
            url,
            "SELECT attempts, finished_by FROM items WHERE (job_id, n) IN "
            "(SELECT * FROM unnest(%s::text[], %s::int[]))",
            [k[0] for k in held_by_b],
            [k[1] for k in held_by_b],
        )
        b_name = owned(b).removesuffix("%")
        assert all(attempts >= 2 and not by.startswith(b_name) for attempts, by in again), again
        rerun = query(url, "SELECT COUNT(*) FROM items WHERE attempts > 1")[0][0]
        print(
            f"\nmany servers: {ITEMS} items; finished by A {finished_by(url, a)}, "
            f"B {finished_by(url, b)} (killed holding {len(held_by_b)}), C {finished_by(url, c)} "
            f"(connections cut after {done_by_c}); {rerun} item(s) run twice; the job ended "
            f"{ended_after_kill_s:.1f} s after the kill"
        )
        # The same job through every live server; every result fetched and decoded.
        assert job(c, job_id)["progress"] == final["progress"]
        for item in final["items"]:
            assert item["state"] == "done"
            for server in (a, c):
                reply = server.request("GET", item["audio_url"])
                assert reply.status_code == 200, reply.text
                assert decoded_seconds(reply.content, item["format"]) > 0.3
