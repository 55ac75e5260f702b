"""The SQLite job database's schema, its migration, and the lock file one server holds.

<data dir>/jobs.sqlite3   jobs and items (WAL mode, synchronous=FULL)
<data dir>/jobs.lock      flock'ed by the server using the store: "pid 123, port 9194"
"""

from __future__ import annotations

import fcntl
import json
import sqlite3
from pathlib import Path

from supervisor.jobs.finish_times import item_audio_s
from supervisor.jobs.storage import UNFINISHED, scoped_key
from supervisor.tenants import DEFAULT_OWNER

DB_NAME = "jobs.sqlite3"
LOCK_NAME = "jobs.lock"

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    idempotency_key TEXT UNIQUE,
    body_sha256 TEXT NOT NULL,
    created_at REAL NOT NULL,
    cancelled_at REAL
);
CREATE TABLE IF NOT EXISTS items (
    job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
    n INTEGER NOT NULL,
    client_id TEXT,
    request TEXT NOT NULL,
    format TEXT NOT NULL,
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    started_at REAL,
    finished_at REAL,
    error TEXT,
    seed INTEGER,
    audio_s REAL,
    qa TEXT,
    PRIMARY KEY (job_id, n)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS items_by_state ON items (state);
"""
# Columns added since the first release, as (table, column, declaration): `migrate` adds those
# a database lacks, so an existing data directory keeps its jobs.
ADDED_COLUMNS = (
    ("jobs", "not_before", "REAL"),  # Unix seconds; NULL: at once
    ("jobs", "deadline", "REAL"),
    ("jobs", "callback_url", "TEXT"),
    ("jobs", "callback_state", "TEXT"),  # pending, delivered, failed; NULL: no callback
    ("jobs", "callback_attempts", "INTEGER NOT NULL DEFAULT 0"),
    ("jobs", "callback_status", "INTEGER"),  # the last attempt's HTTP status; NULL: no answer
    ("jobs", "callback_error", "TEXT"),  # why the last attempt failed
    ("jobs", "callback_next_at", "REAL"),  # no attempt before this (the backoff)
    ("items", "est_audio_s", "REAL"),  # estimated audio, for the job's estimated finish
    ("items", "qa", "TEXT"),  # the quality checks' verdict (JSON); NULL: none recorded
    ("jobs", "owner", f"TEXT NOT NULL DEFAULT '{DEFAULT_OWNER}'"),  # supervisor.tenants
    ("jobs", "callback_secret", "TEXT"),  # the job's own; NULL: its owner's (never shown)
)


def prepare(db: sqlite3.Connection) -> None:
    """Check the file, then set it up; a damaged one raises sqlite3.DatabaseError."""
    db.row_factory = sqlite3.Row
    # quick_check reads every page (O(size), no index cross-checks): a damaged file is found
    # at start, not by the first jobs request.
    verdict = [row[0] for row in db.execute("PRAGMA quick_check(5)")]
    if verdict != ["ok"]:
        raise sqlite3.DatabaseError("; ".join(verdict))
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("PRAGMA foreign_keys=ON")
    db.executescript(SCHEMA)
    db.execute("BEGIN IMMEDIATE")
    try:
        migrate(db)
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def migrate(db: sqlite3.Connection) -> None:
    """Add the columns an older database lacks, and estimate the unfinished items' audio.
    Jobs stored before owners existed are the default owner's, and so are their keys."""
    for table, column, declaration in ADDED_COLUMNS:
        have = {row["name"] for row in db.execute(f"PRAGMA table_info({table})")}
        if column not in have:
            db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")
            if (table, column) == ("jobs", "owner"):
                db.execute(
                    "UPDATE jobs SET idempotency_key = ? || idempotency_key "
                    "WHERE idempotency_key IS NOT NULL",
                    (scoped_key(DEFAULT_OWNER, ""),),
                )
    db.execute("CREATE INDEX IF NOT EXISTS jobs_by_owner ON jobs (owner, seq)")
    rows = db.execute(
        f"SELECT job_id, n, request FROM items WHERE est_audio_s IS NULL AND state IN {UNFINISHED}"
    ).fetchall()
    for row in rows:
        request = json.loads(row["request"])
        estimate = item_audio_s(
            str(request.get("input", "")), request.get("speed"), request.get("duration")
        )
        db.execute(
            "UPDATE items SET est_audio_s = ? WHERE job_id = ? AND n = ?",
            (estimate, row["job_id"], row["n"]),
        )


def lock_holder(data_dir: Path | str) -> str | None:
    """Who holds this data directory ("pid 123, port 9194"), or None when no server does."""
    path = Path(data_dir) / LOCK_NAME
    try:
        probe = path.open("r")
    except FileNotFoundError:
        return None
    with probe:
        try:
            fcntl.flock(probe, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return probe.read().strip() or "another process"
        fcntl.flock(probe, fcntl.LOCK_UN)
    return None
