"""The PostgreSQL job store's queue: leases, claims and every move of an item, for the runner.

Leases: a server claims queued items with `FOR UPDATE SKIP LOCKED` (two servers claiming at once
skip each other's rows instead of waiting), stamping `lease_owner` (itself) and `lease_until`
(the database's clock plus `--lease-s`, so the servers' clocks need not agree). Its runner renews
the leases of the items it works on every third of a lease. Every later move of an item
(finish, fail, release, renew) is conditional on `state = 'running' AND lease_owner = us`, so
a server that lost an item (it was SIGKILLed, or cut from the database longer than a lease)
cannot finish it after another server took it over. `expire`, run by every server's runner each
pass, turns running items whose lease ran out back to `queued` (or `cancelled`, if their job
was cancelled meanwhile).
"""

from __future__ import annotations

import json
import os
import time
from typing import TypedDict

from supervisor.database import Connection, Database
from supervisor.errors import QualityFailed, ServerError
from supervisor.jobs.finish_times import PendingJob, item_audio_s
from supervisor.jobs.storage import UNFINISHED, Claimed, Key, error_record, out_of_space
from supervisor.qa_summary import QaSummary

NOW = "EXTRACT(EPOCH FROM clock_timestamp())"  # the database's clock, the one leases go by
KEYS = "(job_id, n) IN (SELECT * FROM unnest(%(jobs)s::text[], %(ns)s::int[]))"


class KeyParams(TypedDict):
    jobs: list[str]
    ns: list[int]


def key_params(keys: list[Key]) -> KeyParams:
    return {"jobs": [job_id for job_id, _ in keys], "ns": [n for _, n in keys]}


class RolledBack(Exception):
    """Raised inside a transaction to roll back what it wrote (`room_for`'s probe)."""


class PostgresQueue:
    def __init__(self, db: Database, lease_s: float) -> None:
        self.db = db
        self.lease_s = lease_s
        self.mine = {"owner": db.owner, "lease": lease_s}
        db.run(estimate_unfinished)

    # ------------------------------------------------------------ the runner's moves

    def queued(self, limit: int, now: float | None = None) -> list[Claimed]:
        """As SqliteJobStore.queued (jobs whose `not_before` has come, earliest deadline first, then
        the oldest job), skipping items another server is claiming right now (rows locked)."""
        now = time.time() if now is None else now
        rows = self.db.run(
            lambda conn: conn.execute(
                "SELECT i.job_id, i.n, i.request, i.format, i.attempts, j.owner FROM items i "
                "JOIN jobs j ON j.id = i.job_id WHERE i.state = 'queued' "
                "AND (j.not_before IS NULL OR j.not_before <= %s) "
                "ORDER BY j.deadline IS NULL, j.deadline, j.seq, i.n "
                "LIMIT %s FOR UPDATE OF i SKIP LOCKED",
                (now, limit),
            ).fetchall()
        )
        return [Claimed.from_row(r) for r in rows]

    def backlog(self) -> list[PendingJob]:
        """Every job with items still to run (cancelled ones aside), with their estimated audio."""
        rows = self.db.run(
            lambda conn: conn.execute(
                "SELECT j.id, j.seq, j.not_before, j.deadline, "
                "SUM(COALESCE(i.est_audio_s, 0)) AS audio_s "
                f"FROM jobs j JOIN items i ON i.job_id = j.id WHERE i.state IN {UNFINISHED} "
                "AND j.cancelled_at IS NULL GROUP BY j.id, j.seq"
            ).fetchall()
        )
        return [
            PendingJob(r["id"], r["seq"], r["not_before"], r["deadline"], r["audio_s"])
            for r in rows
        ]

    def next_start(self, now: float) -> float | None:
        """The earliest `not_before` still ahead of a job with queued items, or None."""
        row = self.db.run(
            lambda conn: conn.execute(
                "SELECT MIN(j.not_before) AS start FROM jobs j "
                "WHERE j.not_before > %s AND j.cancelled_at IS NULL "
                "AND EXISTS (SELECT 1 FROM items i WHERE i.job_id = j.id AND i.state = 'queued')",
                (now,),
            ).fetchone()
        )
        return None if row is None or row["start"] is None else float(row["start"])

    def claim(self, keys: list[Key]) -> set[Key]:
        """queued -> running under our lease; the keys we got (not those another server took)."""
        rows = self.db.run(
            lambda conn: conn.execute(
                "UPDATE items SET state = 'running', attempts = attempts + 1, "
                f"started_at = %(now)s, lease_owner = %(owner)s, lease_until = {NOW} + %(lease)s "
                "WHERE (job_id, n) IN (SELECT job_id, n FROM items WHERE state = 'queued' "
                f"AND {KEYS} FOR UPDATE SKIP LOCKED) RETURNING job_id, n",
                {**self.mine, **key_params(keys), "now": time.time()},
            ).fetchall()
        )
        return {(r["job_id"], r["n"]) for r in rows}

    def renew(self, keys: list[Key]) -> set[Key]:
        """Extend our leases; the keys still ours to run. An item missing was taken over, or its
        job was cancelled (perhaps through another server): stop it."""
        if not keys:
            return set()
        rows = self.db.run(
            lambda conn: conn.execute(
                f"UPDATE items i SET lease_until = {NOW} + %(lease)s FROM jobs j "
                "WHERE j.id = i.job_id AND j.cancelled_at IS NULL AND i.state = 'running' "
                f"AND i.lease_owner = %(owner)s AND (i.job_id, i.n) IN (SELECT * FROM "
                "unnest(%(jobs)s::text[], %(ns)s::int[])) RETURNING i.job_id, i.n",
                {**self.mine, **key_params(keys)},
            ).fetchall()
        )
        return {(r["job_id"], r["n"]) for r in rows}

    def finish(  # noqa: PLR0913  one column each of the row it writes: JobStorage.finish's signature
        self,
        key: Key,
        fmt: str,
        data: bytes,
        seed: int | None,
        audio_s: float,
        beside: dict[str, bytes] | None = None,
        qa: QaSummary | None = None,
    ) -> bool:
        """The result, the files `beside` it (captions, by extension) and running -> done in
        one transaction, with `qa`, its quality checks. False if the item is no longer ours; a
        retry after a lost answer finds it done and returns False too."""
        job_id, n = key

        def finish(conn: Connection) -> bool:
            done = conn.execute(
                "UPDATE items SET state = 'done', finished_at = %s, error = NULL, seed = %s, "
                "audio_s = %s, qa = %s, lease_owner = NULL, lease_until = NULL, "
                "finished_by = %s WHERE job_id = %s AND n = %s AND state = 'running' "
                "AND lease_owner = %s",
                (
                    time.time(),
                    seed,
                    round(audio_s, 3),
                    json.dumps(qa) if qa else None,
                    self.db.owner,
                    job_id,
                    n,
                    self.db.owner,
                ),
            ).rowcount
            if done:
                conn.execute(
                    "INSERT INTO results (job_id, n, data) VALUES (%s, %s, %s)", (job_id, n, data)
                )
                with conn.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO beside (job_id, n, extension, data) VALUES (%s, %s, %s, %s)",
                        [(job_id, n, ext, content) for ext, content in (beside or {}).items()],
                    )
            return bool(done)

        return self.db.run(finish)

    def fail(self, key: Key, error: ServerError, claimed: bool = True) -> bool:
        """running -> failed (ours), or queued -> failed (claimed=False: invalid before it ran),
        with the error (and the quality checks, for audio that failed them)."""
        job_id, n = key
        qa = json.dumps(error.qa) if isinstance(error, QualityFailed) and error.qa else None
        # Ours and running; or, not claimed, still queued.
        which = "state = 'running' AND lease_owner = %s" if claimed else "state = 'queued'"
        params = (self.db.owner,) if claimed else ()
        record = json.dumps(error_record(error))
        return bool(
            self.db.run(
                lambda conn: (
                    conn.execute(
                        "UPDATE items SET state = 'failed', finished_at = %s, error = %s, qa = %s, "
                        "attempts = attempts + %s, lease_owner = NULL, lease_until = NULL "
                        f"WHERE job_id = %s AND n = %s AND {which}",
                        (time.time(), record, qa, 0 if claimed else 1, job_id, n, *params),
                    ).rowcount
                )
            )
        )

    def release(self, key: Key, counted: bool = True) -> str | None:
        """running (ours) -> queued, or -> cancelled if its job was cancelled. The new state.
        counted=False: its claim is not counted as an attempt (a drain handed it back)."""
        job_id, n = key
        row = self.db.run(
            lambda conn: conn.execute(
                "UPDATE items i SET state = CASE WHEN j.cancelled_at IS NULL THEN 'queued' "
                "ELSE 'cancelled' END, finished_at = CASE WHEN j.cancelled_at IS NULL THEN NULL "
                "ELSE %s END, attempts = GREATEST(i.attempts - %s, 0), lease_owner = NULL, "
                "lease_until = NULL FROM jobs j "
                "WHERE j.id = i.job_id AND i.job_id = %s AND i.n = %s AND i.state = 'running' "
                "AND i.lease_owner = %s RETURNING i.state",
                (time.time(), 0 if counted else 1, job_id, n, self.db.owner),
            ).fetchone()
        )
        return None if row is None else str(row["state"])

    def release_reserve(self) -> bool:
        """Nothing to free: the database server's disk is its own."""
        return False

    def room_for(self, nbytes: int) -> bool:
        """Whether a result of nbytes fits in `results` again: written for one queued item (whose
        row cannot have a result yet) and rolled back. True with no queued item: none to run."""
        probe = os.urandom(nbytes)  # random: neither compressed nor stored inline

        def write(conn: Connection) -> bool:
            row = conn.execute(
                "INSERT INTO results (job_id, n, data) SELECT job_id, n, %s FROM items "
                "WHERE state = 'queued' LIMIT 1 RETURNING job_id",
                (probe,),
            ).fetchone()
            raise RolledBack(row is not None)

        try:
            self.db.run(write)
        except RolledBack:
            return True
        except OSError as exc:  # Database.run: DiskFull is ENOSPC
            if not out_of_space(exc):
                raise
            return False
        raise AssertionError("unreachable")

    def expire(self) -> int:
        """Running items whose lease ran out -> queued (or cancelled); how many."""
        return int(
            self.db.run(
                lambda conn: (
                    conn.execute(
                        "UPDATE items i SET state = CASE WHEN j.cancelled_at IS NULL THEN 'queued' "
                        "ELSE 'cancelled' END, finished_at = CASE WHEN j.cancelled_at IS NULL "
                        "THEN NULL ELSE j.cancelled_at END, lease_owner = NULL, lease_until = NULL "
                        f"FROM jobs j WHERE j.id = i.job_id AND i.state = 'running' "
                        f"AND i.lease_until < {NOW}"
                    ).rowcount
                )
            )
        )

    def recover(self) -> tuple[int, int]:
        """At start: nothing of ours can be running (our owner name is new); what a dead server
        left expires with its leases. (0, items put back now)."""
        return 0, self.expire()

    def sweep(self, retention_s: float, now: float | None = None) -> list[str]:
        """Remove jobs whose every item ended more than retention_s ago, results and all."""
        cutoff = (time.time() if now is None else now) - retention_s
        rows = self.db.run(
            lambda conn: conn.execute(
                "DELETE FROM jobs WHERE id IN (SELECT job_id FROM items GROUP BY job_id "
                "HAVING SUM(CASE WHEN state IN ('queued', 'running') THEN 1 ELSE 0 END) = 0 "
                "AND MAX(COALESCE(finished_at, 0)) < %s) RETURNING id",
                (cutoff,),
            ).fetchall()
        )
        return [str(r["id"]) for r in rows]


def estimate_unfinished(conn: Connection) -> None:
    """Estimate the audio of unfinished items stored before version 2 of the schema (their
    `est_audio_s` is NULL), as the API does for new ones; after that, none is left to do."""
    rows = conn.execute(
        f"SELECT job_id, n, request FROM items WHERE est_audio_s IS NULL AND state IN {UNFINISHED}"
    ).fetchall()
    for row in rows:
        request = json.loads(row["request"])
        estimate = item_audio_s(
            str(request.get("input", "")), request.get("speed"), request.get("duration")
        )
        conn.execute(
            "UPDATE items SET est_audio_s = %s WHERE job_id = %s AND n = %s",
            (estimate, row["job_id"], row["n"]),
        )
