"""The job store on real SQLite files: exactly-once moves, recovery after a crash, the lock,
retention, migrations. What both stores promise alike is in test_storage.py."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from supervisor.database import StoreCorrupt, StoreLocked
from supervisor.errors import TaskFailed
from supervisor.jobs.schedule import JobSchedule
from supervisor.jobs.sqlite_schema import DB_NAME, SCHEMA
from supervisor.jobs.sqlite_store import SqliteJobStore
from supervisor.jobs.storage import NewItem, body_digest, out_of_space
from tests.helpers.job_store import new_items
from tests.helpers.paths import REPO_ROOT
from tests.helpers.tmpfs import mount_tmpfs


@pytest.fixture
def store(tmp_path: Path) -> SqliteJobStore:
    opened = SqliteJobStore(tmp_path)
    yield opened
    opened.close()


def test_the_database_is_in_wal_mode_and_the_job_is_on_disk_before_create_returns(
    store: SqliteJobStore, tmp_path: Path
) -> None:
    job_id, created = store.create(new_items(3), "sha")
    assert created and job_id.startswith("job_")
    # A second connection (another process, as after a crash) sees the committed job at once.
    other = sqlite3.connect(tmp_path / "jobs.sqlite3")
    assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert (
        other.execute("SELECT COUNT(*) FROM items WHERE job_id = ?", (job_id,)).fetchone()[0] == 3
    )
    other.close()
    job = store.job(job_id)
    assert job is not None and job["state"] == "queued"
    assert job["progress"] == {
        "total": 3,
        "queued": 3,
        "running": 0,
        "done": 0,
        "failed": 0,
        "cancelled": 0,
    }
    assert [i["id"] for i in job["items"]] == ["id0", "id1", "id2"]


def test_a_store_from_before_the_quality_checks_gains_its_qa_column(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / DB_NAME)
    db.execute(
        "CREATE TABLE items (job_id TEXT NOT NULL, n INTEGER NOT NULL, client_id TEXT, "
        "request TEXT NOT NULL, format TEXT NOT NULL, state TEXT NOT NULL, attempts INTEGER "
        "NOT NULL DEFAULT 0, started_at REAL, finished_at REAL, error TEXT, seed INTEGER, "
        "audio_s REAL, PRIMARY KEY (job_id, n)) WITHOUT ROWID"
    )
    db.close()
    opened = SqliteJobStore(tmp_path)
    try:
        job_id, _ = opened.create(new_items(1), "sha")
        job = opened.job(job_id)
        assert job is not None and job["items"][0]["qa"] is None
    finally:
        opened.close()


def test_body_digest_ignores_spacing_and_key_order() -> None:
    assert body_digest({"a": 1, "b": [1, 2]}) == body_digest({"b": [1, 2], "a": 1})
    assert body_digest({"a": 1}) != body_digest({"a": 2})


def test_each_move_happens_once(store: SqliteJobStore) -> None:
    job_id, _ = store.create(new_items(3), "sha")
    queued = store.queued(10)
    assert [c.n for c in queued] == [0, 1, 2]
    keys = [c.key for c in queued]
    assert store.claim(keys) == set(keys)
    assert store.claim(keys) == set()  # claimed already: nothing is taken twice
    assert store.finish(keys[0], "wav", b"RIFF", seed=7, audio_s=1.5)
    assert not store.finish(keys[0], "wav", b"other", seed=8, audio_s=1.0)  # done already
    assert store.result_path(job_id, 0, "wav").read_bytes() == b"RIFF"
    assert store.fail(keys[1], TaskFailed("generation failed: boom"))
    assert store.release(keys[2]) == "queued"
    assert store.release(keys[2]) is None  # not running any more
    job = store.job(job_id)
    assert job is not None
    states = [(i["state"], i["attempts"]) for i in job["items"]]
    assert states == [("done", 1), ("failed", 1), ("queued", 1)]
    assert job["items"][0]["seed"] == 7 and job["items"][0]["audio_seconds"] == 1.5
    assert (
        job["items"][1]["error"]["code"] == "generation_failed"
        and job["items"][1]["error"]["status"] == 500
    )
    assert job["state"] == "running"
    store.claim([keys[2]])
    store.finish(keys[2], "wav", b"RIFF2", seed=1, audio_s=1.0)
    job = store.job(job_id)
    assert job is not None and job["state"] == "failed" and job["finished_at"] is not None


def test_cancel_ends_queued_items_and_a_running_one_ends_cancelled_when_released(
    store: SqliteJobStore,
) -> None:
    job_id, _ = store.create(new_items(3), "sha")
    running = store.queued(1)[0].key
    store.claim([running])
    assert store.cancel(job_id)
    assert store.release(running) == "cancelled"
    job = store.job(job_id)
    assert job is not None and job["state"] == "cancelled" and job["cancelled_at"] is not None
    assert [i["state"] for i in job["items"]] == ["cancelled"] * 3
    assert store.queued(10) == []
    assert not store.cancel("job_nonexistent")


def test_cancelling_a_finished_job_changes_nothing(store: SqliteJobStore) -> None:
    job_id, _ = store.create(new_items(1), "sha")
    key = store.queued(1)[0].key
    store.claim([key])
    store.finish(key, "wav", b"x", seed=None, audio_s=0.1)
    assert store.cancel(job_id)
    job = store.job(job_id)
    assert job is not None and job["state"] == "completed" and job["cancelled_at"] is None


def test_recover_requeues_running_items_and_keeps_a_result_that_was_renamed_into_place(
    tmp_path: Path,
) -> None:
    store = SqliteJobStore(tmp_path)
    job_id, _ = store.create(new_items(3), "sha")
    keys = [c.key for c in store.queued(3)]
    store.claim(keys)
    # Item 0: its result was renamed into place, then the process died before the commit.
    store.result_path(job_id, 0, "wav").parent.mkdir(parents=True, exist_ok=True)
    store.result_path(job_id, 0, "wav").write_bytes(b"whole")
    # Item 1: died while writing its temporary file.
    (store.result_path(job_id, 1, "wav").parent / ".1.wav.abcd1234.tmp").write_bytes(b"half")
    (store.results / "job_orphan").mkdir()
    store.close()

    again = SqliteJobStore(tmp_path)
    assert again.recover() == (1, 2)
    job = again.job(job_id)
    assert job is not None
    assert [(i["state"], i["attempts"]) for i in job["items"]] == [
        ("done", 1),
        ("queued", 1),
        ("queued", 1),
    ]
    assert sorted(p.name for p in (again.results / job_id).iterdir()) == ["0.wav"]
    assert not (again.results / "job_orphan").exists()
    assert [c.n for c in again.queued(10)] == [1, 2]
    again.close()


def test_a_second_server_on_the_same_data_directory_is_refused(
    store: SqliteJobStore, tmp_path: Path
) -> None:
    with pytest.raises(StoreLocked):
        SqliteJobStore(tmp_path)
    code = "import sys; from supervisor.database import StoreLocked; from supervisor.jobs.sqlite_store import SqliteJobStore\ntry:\n SqliteJobStore(sys.argv[1])\nexcept StoreLocked:\n sys.exit(7)"
    assert (
        subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=REPO_ROOT).returncode == 7
    )


def test_the_lock_goes_with_a_killed_process(tmp_path: Path) -> None:
    """The child must have taken the lock (it says so) and died by SIGKILL, holding it; a child
    that failed before locking would prove nothing."""
    code = (
        "import sys, os, signal; from supervisor.jobs.sqlite_store import SqliteJobStore\n"
        "SqliteJobStore(sys.argv[1]); print('locked', flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)"
    )
    child = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], cwd=REPO_ROOT, capture_output=True, text=True
    )
    assert child.returncode == -signal.SIGKILL and child.stdout == "locked\n", child.stderr
    SqliteJobStore(tmp_path).close()


def test_sweep_removes_ended_jobs_past_retention_with_their_files(store: SqliteJobStore) -> None:
    old, _ = store.create(new_items(1), "a")
    key = store.queued(1)[0].key
    store.claim([key])
    store.finish(key, "wav", b"x", seed=None, audio_s=0.1)
    unfinished, _ = store.create(new_items(1), "b")
    assert store.sweep(3600) == []  # ended just now
    assert store.sweep(3600, now=time.time() + 7200) == [old]
    assert store.job(old) is None and not (store.results / old).exists()
    assert store.job(unfinished) is not None  # still queued: never removed


def test_list_pages_newest_first(store: SqliteJobStore) -> None:
    ids = [store.create(new_items(1), str(i))[0] for i in range(5)]
    page, more = store.jobs_page(2)
    assert [j["id"] for j in page] == ids[:2:-1][:2] and more
    page2, more2 = store.jobs_page(2, after=page[-1]["id"])
    assert [j["id"] for j in page2] == [ids[2], ids[1]] and more2
    page3, more3 = store.jobs_page(2, after=page2[-1]["id"])
    assert [j["id"] for j in page3] == [ids[0]] and not more3
    assert store.jobs_page(2, after="job_unknown") == ([], False)


def test_results_are_written_without_leaving_temporary_files(store: SqliteJobStore) -> None:
    job_id, _ = store.create(new_items(1, "mp3"), "sha")
    key = store.queued(1)[0].key
    store.claim([key])
    store.finish(key, "mp3", os.urandom(1000), seed=None, audio_s=0.5)
    assert [p.name for p in (store.results / job_id).iterdir()] == ["0.mp3"]


def test_items_of_a_job_cancelled_just_before_a_crash_are_not_run_after_it(tmp_path: Path) -> None:
    """A real process claims two items, the job is cancelled while they run, and the process is
    SIGKILLed before the runner released them. Before, recovery queued them again."""
    code = (
        "import os, signal, sys\n"
        "from supervisor.jobs.sqlite_store import SqliteJobStore; from supervisor.jobs.storage import NewItem\n"
        "store = SqliteJobStore(sys.argv[1])\n"
        "job_id, _ = store.create([NewItem({'input': f'item {i}'}, None, 'wav') for i in range(3)], 'sha')\n"
        "store.claim([c.key for c in store.queued(2)])\n"
        "store.cancel(job_id)\n"
        "print(job_id, flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    crashed = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], cwd=REPO_ROOT, capture_output=True, text=True
    )
    assert crashed.returncode == -9, crashed.stderr
    job_id = crashed.stdout.strip()
    again = SqliteJobStore(tmp_path)
    again.recover()
    job = again.job(job_id)
    assert job is not None and job["state"] == "cancelled"
    assert [i["state"] for i in job["items"]] == ["cancelled", "cancelled", "cancelled"]
    assert again.queued(10) == []
    again.close()


def test_a_damaged_database_is_found_when_the_store_opens(tmp_path: Path) -> None:
    store = SqliteJobStore(tmp_path)
    store.create([NewItem({"input": f"item {i} " * 40}, None, "wav") for i in range(300)], "sha")
    store.close()
    with sqlite3.connect(tmp_path / DB_NAME) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    damaged = bytearray((tmp_path / DB_NAME).read_bytes())
    damaged[4096 * 2 : 4096 * 4] = b"\x5a" * 8192
    (tmp_path / DB_NAME).write_bytes(bytes(damaged))
    with pytest.raises(StoreCorrupt, match="damaged"):
        SqliteJobStore(tmp_path)
    SqliteJobStore(
        tmp_path / "elsewhere"
    ).close()  # the failed open let go of nothing it should keep


def test_a_result_that_meets_a_full_disk_leaves_no_temporary_file(tmp_path: Path) -> None:
    with mount_tmpfs(tmp_path / "disk", "1m") as mount:
        store = SqliteJobStore(mount)
        job_id, _ = store.create(new_items(1), "sha")
        store.claim([c.key for c in store.queued(1)])
        with pytest.raises(OSError) as raised:
            store.finish((job_id, 0), "wav", b"\0" * 2 * 2**20, 1, 1.0)
        assert out_of_space(raised.value)
        assert not list(mount.rglob("*.tmp"))
        store.close()


def test_an_existing_database_gains_the_schedule_columns_and_keeps_its_jobs(
    tmp_path: Path,
) -> None:
    # The store's first schema, as a data directory from before schedules holds it.
    old = sqlite3.connect(tmp_path / DB_NAME)
    old.executescript(SCHEMA)
    old.execute("INSERT INTO jobs (id, body_sha256, created_at) VALUES ('job_old', 'sha', 1.0)")
    old.execute(
        "INSERT INTO items (job_id, n, request, format, state) VALUES "
        "('job_old', 0, '{\"input\": \"An item queued before the upgrade.\"}', 'wav', 'queued')"
    )
    old.commit()
    old.close()
    store = SqliteJobStore(tmp_path)
    try:
        job = store.job("job_old")
        assert job is not None and job["state"] == "queued" and job["progress"]["queued"] == 1
        assert (job["not_before"], job["deadline"], job["callback"]) == (None, None, None)
        (pending,) = store.backlog()
        assert pending.job_id == "job_old" and pending.audio_s > 0  # estimated by the migration
        assert [item.key for item in store.queued(10)] == [("job_old", 0)]
    finally:
        store.close()
    SqliteJobStore(tmp_path).close()  # opening it again migrates nothing twice


def test_a_cancelled_jobs_callback_is_due_at_once(store: SqliteJobStore) -> None:
    job_id, _ = store.create(
        new_items(3), "sha", schedule=JobSchedule(callback_url="http://127.0.0.1:9/")
    )
    store.cancel(job_id)
    assert [due.job_id for due in store.callbacks_due(time.time())] == [job_id]
    assert store.backlog() == []
