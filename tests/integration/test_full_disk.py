"""A full disk never strands a job (issue 35): on a real, small tmpfs, for both stores.

The SQLite store's data directory, or the PostgreSQL tablespace that holds its `results`, is a
tmpfs of a few MiB, mostly taken by a filler file, so that a job of 30 items fills it part way.
The job then waits for space with no item left `running`, says so in its object and in
`/health`, and finishes by itself once the filler is deleted.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import shutil
import sqlite3
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from supervisor.jobs.full_disk import FULL_DISK_ATTEMPTS
from tests.helpers.job_helpers import ended, submit, wait_job
from tests.helpers.live_server import LiveServer, live
from tests.helpers.pg_cluster import Cluster
from tests.helpers.tmpfs import mount_tmpfs

BOUND_S = 120.0
DISK = "8m"
# Room for some results, not for all 30 (each ~0.1 MB, which SQLite writes to its WAL, then
# to the database). With 700 KiB a full run once saw the job wait with none done.
LEFT_FREE = 1536 * 1024


@pytest.fixture
def tmpfs() -> Iterator[Path]:
    """A tmpfs of DISK, at a path PostgreSQL's user (nobody) can reach (not under pytest's
    tmp_path, which only root may enter)."""
    place = Path(tempfile.mkdtemp(prefix="omnivoice-disk-"))
    place.chmod(0o755)
    try:
        with mount_tmpfs(place, DISK) as mount:
            yield mount
    finally:
        place.rmdir()


def leave_free(disk: Path, nbytes: int) -> Path:
    """A filler file taking all of the disk's free space but nbytes."""
    filler = disk / "filler"
    stat = os.statvfs(disk)
    with filler.open("wb") as out:
        out.write(b"\0" * max(0, stat.f_bavail * stat.f_frsize - nbytes))
    return filler


def results_on(disk: Path, url: str) -> str:
    """Move the PostgreSQL store's `results` (uncompressed) into a tablespace on `disk`; its name."""
    place = disk / "tablespace"
    place.mkdir()
    shutil.chown(place, "nobody")  # the test cluster runs as nobody (tests/helpers/pg_cluster.py)
    name = "tiny_" + uuid.uuid4().hex[:8]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE TABLESPACE {name} LOCATION '{place}'")
        conn.execute(f"ALTER TABLE results SET TABLESPACE {name}")
        conn.execute("ALTER TABLE results ALTER COLUMN data SET STORAGE EXTERNAL")
    return name


def forget_tablespace(cluster: Cluster, url: str, name: str) -> None:
    """Drop the test's database and its tablespace, then checkpoint: the session's cluster is
    shared, and a later restart (test_pg_store stops and starts it) would otherwise replay the
    tablespace's creation from the log and fail on its folder, gone with the tmpfs."""
    with psycopg.connect(cluster.url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {url.rsplit('/', 1)[1]} WITH (FORCE)")
        conn.execute(f"DROP TABLESPACE IF EXISTS {name}")
        conn.execute("CHECKPOINT")


def items(count: int) -> list[dict[str, Any]]:
    return [
        {"input": f"Item {i} of a job on a small disk.", "response_format": "wav"}
        for i in range(count)
    ]


@contextlib.contextmanager
def small_disk_server(
    store: str, request: pytest.FixtureRequest, tmp_path: Path, tmpfs: Path
) -> Iterator[tuple[LiveServer, Callable[[str], None]]]:
    """A server whose results go to `tmpfs` (SQLite: the data directory; PostgreSQL: `results`
    in a tablespace there), and a way to run SQL on its store from outside."""
    flags: tuple[str, ...] = ()
    if store == "sqlite":  # live() puts the data directory at tmp_path/"data"
        (tmp_path / "data").symlink_to(tmpfs)
    else:
        url = request.getfixturevalue("pg_cluster").new_database()
        flags = ("--store", url)

    def run_sql(sql: str) -> None:
        if store == "sqlite":
            with contextlib.closing(sqlite3.connect(tmpfs / "jobs.sqlite3", timeout=30)) as db:
                db.execute(sql)
                db.commit()
        else:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(sql.encode())

    space = None
    try:
        with live(tmp_path, "--max-batch-size", "4", *flags) as server:
            if store == "postgresql":
                space = results_on(tmpfs, url)
            yield server, run_sql
    finally:
        if space is not None:
            forget_tablespace(request.getfixturevalue("pg_cluster"), url, space)


@pytest.mark.parametrize("store", ["sqlite", "postgresql"])
def test_a_full_disk_holds_the_job_waiting_for_space_and_it_resumes_by_itself(
    store: str, request: pytest.FixtureRequest, tmp_path: Path, tmpfs: Path
) -> None:
    with small_disk_server(store, request, tmp_path, tmpfs) as (server, _):
        filler = leave_free(tmpfs, LEFT_FREE)
        job = submit(server, items(30))
        held = wait_job(
            server,
            job["id"],
            lambda b: b["waiting_for_space"] is not None and b["progress"]["running"] == 0,
            BOUND_S,
            "the job to wait for space with nothing running",
        )
        assert held["state"] == "running" and held["progress"]["failed"] == 0, held["progress"]
        assert 0 < held["progress"]["done"] < 30 and held["progress"]["queued"] > 0
        waiting = held["waiting_for_space"]
        assert waiting["needed_bytes"] > 0 and any(
            words in waiting["error"] for words in ("No space left", "disk is full")
        ), waiting
        # The items that met the full disk are queued again with their attempt counted.
        assert any(i["state"] == "queued" and i["attempts"] >= 1 for i in held["items"])
        health = server.health()["jobs"]
        assert health["state"] == "waiting_for_space", health
        assert health["waiting_for_space"]["needed_bytes"] == waiting["needed_bytes"]
        anonymous = server.request("GET", "/health", auth=False).json()["jobs"]
        assert anonymous["state"] == "waiting_for_space"
        assert anonymous["waiting_for_space"]["error"] is None  # it may name a path

        filler.unlink()
        body = wait_job(server, job["id"], ended, BOUND_S, "the job to finish once space is back")
        assert [i["state"] for i in body["items"]] == ["done"] * 30
        assert body["waiting_for_space"] is None
        assert server.health()["jobs"]["state"] == "ok"
        assert not list(tmpfs.rglob("*.tmp"))
        log = server.log.read_text()
    assert "Traceback" not in log and log.count("waiting for space; no item starts") == 1


@pytest.mark.parametrize("store", ["sqlite", "postgresql"])
def test_an_item_refused_on_its_last_attempt_fails_with_insufficient_storage(
    store: str, request: pytest.FixtureRequest, tmp_path: Path, tmpfs: Path
) -> None:
    with small_disk_server(store, request, tmp_path, tmpfs) as (server, run_sql):
        leave_free(tmpfs, 64 * 1024)  # room for the job's rows, not for its result
        soon = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=4)
        reply = server.request(
            "POST", "/v1/jobs", json={"items": items(1), "not_before": soon.isoformat()}
        )
        assert reply.status_code == 202, reply.text
        # As if it had met a full disk on its earlier attempts (the job has not started yet).
        run_sql(f"UPDATE items SET attempts = {FULL_DISK_ATTEMPTS - 1} WHERE state = 'queued'")
        body = wait_job(server, reply.json()["id"], ended, BOUND_S, "the item to end")
        item = body["items"][0]
        assert item["state"] == "failed" and item["attempts"] == FULL_DISK_ATTEMPTS, item
        assert item["error"]["code"] == "insufficient_storage", item
        assert f"after {FULL_DISK_ATTEMPTS} attempts" in item["error"]["message"]
        assert not list(tmpfs.rglob("*.tmp"))
