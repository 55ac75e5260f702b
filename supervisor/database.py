"""The PostgreSQL connection pool many servers share, and the schema each server migrates itself.

`Database.open(url, owner)` opens a psycopg pool, then brings the schema to the newest version
under a transaction-scoped advisory lock, so servers starting together migrate it once. Each
version is a script applied in one transaction with its number written to `schema_version`.

`Database.run(work)` runs `work(connection)` in one transaction. The pool checks a connection
before lending it, so one cut by the network or `pg_terminate_backend` is replaced; work that may
safely run again (`retry=True`) gets a second connection when the first breaks mid-way. A
database that cannot be reached raises StoreUnavailable, which the API answers with a 503; a
database whose disk is full raises OSError(ENOSPC), as a full data directory does (a 507).

The stores' errors live here, whichever database raised them: `StoreUnavailable` (PostgreSQL
unreachable), `StoreLocked` and `StoreCorrupt` (a SQLite data directory another server holds, or
a damaged one).
"""

from __future__ import annotations

import errno
import logging
from collections.abc import Callable
from typing import TypeVar

import psycopg
import psycopg_pool
from psycopg.rows import DictRow, dict_row

log = logging.getLogger("omnivoice.pg")

T = TypeVar("T")
Connection = psycopg.Connection[DictRow]

CONNECT_TIMEOUT_S = 3  # a stopped database: a 503 within seconds, not the pool's 30 s default
POOL_MAX = 8  # the runner, results being stored, lease renewals, and requests
ADVISORY_LOCK = 0x0F1C  # held while one server migrates the schema (any constant of ours)

# Version n is MIGRATIONS[n - 1]; append new versions, never edit a released one.
MIGRATIONS = [
    """
    CREATE TABLE jobs (
        seq BIGSERIAL PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        idempotency_key TEXT UNIQUE,
        body_sha256 TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        cancelled_at DOUBLE PRECISION
    );
    CREATE TABLE items (
        job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
        n INTEGER NOT NULL,
        client_id TEXT,
        request TEXT NOT NULL,
        format TEXT NOT NULL,
        state TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        started_at DOUBLE PRECISION,
        finished_at DOUBLE PRECISION,
        error TEXT,
        seed BIGINT,
        audio_s DOUBLE PRECISION,
        lease_owner TEXT,
        lease_until DOUBLE PRECISION,
        finished_by TEXT,
        PRIMARY KEY (job_id, n)
    );
    CREATE INDEX items_by_state ON items (state);
    CREATE TABLE results (
        job_id TEXT NOT NULL,
        n INTEGER NOT NULL,
        data BYTEA NOT NULL,
        PRIMARY KEY (job_id, n),
        FOREIGN KEY (job_id, n) REFERENCES items (job_id, n) ON DELETE CASCADE
    );
    CREATE TABLE voices (
        name TEXT PRIMARY KEY,
        created_at BIGINT NOT NULL,
        data BYTEA NOT NULL
    );
    """,
    # 2: schedules and callbacks (issue 16), quality checks (15), captions (17).
    """
    ALTER TABLE jobs
        ADD COLUMN not_before DOUBLE PRECISION,
        ADD COLUMN deadline DOUBLE PRECISION,
        ADD COLUMN callback_url TEXT,
        ADD COLUMN callback_state TEXT,
        ADD COLUMN callback_attempts INTEGER NOT NULL DEFAULT 0,
        ADD COLUMN callback_status INTEGER,
        ADD COLUMN callback_error TEXT,
        ADD COLUMN callback_next_at DOUBLE PRECISION;
    ALTER TABLE items
        ADD COLUMN est_audio_s DOUBLE PRECISION,
        ADD COLUMN qa TEXT;
    CREATE TABLE beside (
        job_id TEXT NOT NULL,
        n INTEGER NOT NULL,
        extension TEXT NOT NULL,
        data BYTEA NOT NULL,
        PRIMARY KEY (job_id, n, extension),
        FOREIGN KEY (job_id, n) REFERENCES items (job_id, n) ON DELETE CASCADE
    );
    CREATE INDEX jobs_callbacks_pending ON jobs (callback_state)
        WHERE callback_state = 'pending';
    """,
    # 3: owners (issue 36): what was stored before is the default owner's (supervisor.tenants),
    # and an idempotency key is stored as "<owner> <key>" (store.scoped_key).
    """
    ALTER TABLE jobs ADD COLUMN owner TEXT NOT NULL DEFAULT 'default';
    UPDATE jobs SET idempotency_key = 'default ' || idempotency_key
        WHERE idempotency_key IS NOT NULL;
    CREATE INDEX jobs_by_owner ON jobs (owner, seq);
    ALTER TABLE voices ADD COLUMN owner TEXT NOT NULL DEFAULT 'default';
    """,
    # 4: a job's own callback secret (issue 36); NULL: its owner's, as before.
    """
    ALTER TABLE jobs ADD COLUMN callback_secret TEXT;
    """,
]


class StoreUnavailable(RuntimeError):
    """The database cannot be reached now (stopped, or the network to it is down): a 503."""


class StoreLocked(RuntimeError):
    """Another server holds this data directory's job store (SQLite)."""


class StoreCorrupt(RuntimeError):
    """The job database fails SQLite's quick check (or is not a database at all)."""


def is_postgres(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))


def unavailable(exc: BaseException) -> StoreUnavailable:
    return StoreUnavailable(
        f"the database cannot be reached ({str(exc).strip() or type(exc).__name__})"
    )


def unreachable(url: str) -> str | None:
    """Why a connection to the database fails, or None when one succeeds (checked at start)."""
    try:
        with psycopg.connect(url, connect_timeout=CONNECT_TIMEOUT_S):
            return None
    except psycopg.Error as exc:
        return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


class Database:
    def __init__(self, pool: psycopg_pool.ConnectionPool[Connection], owner: str) -> None:
        self.pool = pool
        self.owner = owner  # this server's name in lease_owner and application_name

    @classmethod
    def open(cls, url: str, owner: str) -> Database:
        """Connect and migrate; StoreUnavailable when the database cannot be reached."""
        pool: psycopg_pool.ConnectionPool[Connection] = psycopg_pool.ConnectionPool(
            url,
            connection_class=psycopg.Connection[DictRow],
            kwargs=cls.connect_kwargs(owner),
            min_size=1,
            max_size=POOL_MAX,
            timeout=CONNECT_TIMEOUT_S,
            check=psycopg_pool.ConnectionPool.check_connection,
            name="omnivoice",
            open=False,
        )
        pool.open(wait=False)
        database = cls(pool, owner)
        try:
            database.run(migrate)
        except BaseException:  # unreachable, or a schema newer than us: nothing left open
            pool.close()
            raise
        return database

    @staticmethod
    def connect_kwargs(owner: str) -> dict[str, object]:
        return {
            "row_factory": dict_row,
            "connect_timeout": CONNECT_TIMEOUT_S,
            "application_name": f"omnivoice {owner}"[:63],
        }

    def run(self, work: Callable[[Connection], T], retry: bool = True) -> T:
        """work(connection) in one transaction; once more on a fresh connection if it broke."""
        for attempt in (1, 2):
            try:
                with self.pool.connection() as conn, conn.transaction():
                    return work(conn)
            except psycopg_pool.PoolTimeout as exc:
                raise unavailable(exc) from None
            except psycopg.errors.DiskFull as exc:  # the database's disk: as a full data directory
                why = str(exc).strip().splitlines()[0]
                raise OSError(errno.ENOSPC, f"the database's disk is full ({why})") from None
            except psycopg.OperationalError as exc:
                if attempt == 2 or not retry:
                    raise unavailable(exc) from None
                log.info("database connection lost (%s); trying a fresh one", str(exc).strip())
        raise AssertionError("unreachable")

    def close(self) -> None:
        self.pool.close()


def migrate(conn: Connection) -> None:
    """Apply the versions this database lacks, under the advisory lock (in run's transaction)."""
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (ADVISORY_LOCK,))
    conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
    row = conn.execute("SELECT MAX(version) AS v FROM schema_version").fetchone()
    current = int(row["v"]) if row and row["v"] is not None else 0
    if current > len(MIGRATIONS):
        raise RuntimeError(
            f"the database's schema is version {current}, newer than this server's "
            f"({len(MIGRATIONS)}): upgrade this server"
        )
    for version in range(current + 1, len(MIGRATIONS) + 1):
        conn.execute(MIGRATIONS[version - 1].encode())
        conn.execute("INSERT INTO schema_version (version) VALUES (%s)", (version,))
        log.info("database schema migrated to version %d", version)
