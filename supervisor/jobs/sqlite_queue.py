"""The SQLite job store's queue: every move of an item, for the runner, and recovery at start.

One server holds the data directory (its flock), so there are no leases: `claim` takes queued
items, `renew` and `expire` have nothing to do. Every move is a conditional UPDATE on the state
it expects. `finish` writes the result to a temporary file, flushes it, renames it to its final
name, flushes the directory, and only then commits `done`, all under one lock. A crash can
therefore leave an item `running` with its final file already in place; `recover` (at start)
marks such an item done, ends the `running` items of a cancelled job `cancelled`, puts every
other `running` item back to `queued`, and removes temporary files. So after a crash or a restart
unfinished items run again, finished ones are never redone, and a file under a final name is
always whole.
"""

from __future__ import annotations

import json
import shutil
import time

from supervisor.errors import QualityFailed, ServerError
from supervisor.jobs.finish_times import PendingJob
from supervisor.jobs.sqlite_data_dir import TMP_SUFFIX, SqliteDataDir
from supervisor.jobs.storage import UNFINISHED, Claimed, Key, error_record
from supervisor.qa_summary import QaSummary


class SqliteQueue(SqliteDataDir):
    def queued(self, limit: int, now: float | None = None) -> list[Claimed]:
        """Up to `limit` queued items of jobs whose `not_before` has come (not claimed yet): the
        earliest deadline first, jobs without one last, then the oldest job, in item order."""
        now = time.time() if now is None else now
        with self.lock:
            rows = self.db.execute(
                "SELECT i.job_id, i.n, i.request, i.format, i.attempts, j.owner "
                "FROM items i JOIN jobs j ON j.id = i.job_id "
                "WHERE i.state = 'queued' AND (j.not_before IS NULL OR j.not_before <= ?) "
                "ORDER BY j.deadline IS NULL, j.deadline, j.seq, i.n LIMIT ?",
                (now, limit),
            ).fetchall()
        return [Claimed.from_row(r) for r in rows]

    def backlog(self) -> list[PendingJob]:
        """Every job with items still to run (cancelled ones aside), with their estimated audio."""
        with self.lock:
            rows = self.db.execute(
                "SELECT j.id, j.seq, j.not_before, j.deadline, "
                "SUM(COALESCE(i.est_audio_s, 0)) AS audio_s "
                f"FROM jobs j JOIN items i ON i.job_id = j.id WHERE i.state IN {UNFINISHED} "
                "AND j.cancelled_at IS NULL GROUP BY j.id"
            ).fetchall()
        return [
            PendingJob(r["id"], r["seq"], r["not_before"], r["deadline"], r["audio_s"])
            for r in rows
        ]

    def next_start(self, now: float) -> float | None:
        """The earliest `not_before` still ahead of a job with queued items, or None."""
        with self.lock:
            row = self.db.execute(
                "SELECT MIN(j.not_before) FROM jobs j "
                "WHERE j.not_before > ? AND j.cancelled_at IS NULL "
                "AND EXISTS (SELECT 1 FROM items i WHERE i.job_id = j.id AND i.state = 'queued')",
                (now,),
            ).fetchone()
        return None if row[0] is None else float(row[0])

    def claim(self, keys: list[Key]) -> set[Key]:
        """queued -> running, one attempt more; returns the keys that were still queued."""
        now, claimed = time.time(), set()
        with self.transaction() as db:
            for job_id, n in keys:
                changed = db.execute(
                    "UPDATE items SET state = 'running', attempts = attempts + 1, started_at = ? "
                    "WHERE job_id = ? AND n = ? AND state = 'queued'",
                    (now, job_id, n),
                ).rowcount
                if changed:
                    claimed.add((job_id, n))
        return claimed

    def renew(self, keys: list[Key]) -> set[Key]:
        """Every running item stays ours: one server holds the database (the flock)."""
        return set(keys)

    def expire(self) -> int:
        """No leases to expire: `recover` at start puts back what a crash left running."""
        return 0

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
        """Write the result atomically, then running -> done. False if the item was not running.
        `beside`: more files by extension (captions), written before the audio, so that an item
        whose audio exists after a crash (`recover`) has them too. `qa`: its quality checks."""
        job_id, n = key
        with self.lock:
            row = self.db.execute(
                "SELECT state FROM items WHERE job_id = ? AND n = ?", (job_id, n)
            ).fetchone()
            if row is None or row["state"] != "running":
                return False
            written = [self.result_path(job_id, n, ext) for ext in [*(beside or {}), fmt]]
            try:
                for path, content in zip(written, [*(beside or {}).values(), data]):
                    self._write_result(path, content)
                self.db.execute(
                    "UPDATE items SET state = 'done', finished_at = ?, error = NULL, seed = ?, audio_s = ?, "
                    "qa = ? WHERE job_id = ? AND n = ? AND state = 'running'",
                    (
                        time.time(),
                        seed,
                        round(audio_s, 3),
                        json.dumps(qa) if qa else None,
                        job_id,
                        n,
                    ),
                )
            except BaseException:  # not done: its files would hold space (and `recover` finish it)
                for path in written:
                    path.unlink(missing_ok=True)
                raise
        return True

    def fail(self, key: Key, error: ServerError, claimed: bool = True) -> bool:
        """running -> failed (or queued -> failed, claimed=False: invalid before it ran), with the
        error (and the quality checks, for audio that failed them)."""
        job_id, n = key
        qa = json.dumps(error.qa) if isinstance(error, QualityFailed) and error.qa else None
        with self.transaction() as db:
            return bool(
                db.execute(
                    "UPDATE items SET state = 'failed', finished_at = ?, error = ?, qa = ?, "
                    "attempts = attempts + ? WHERE job_id = ? AND n = ? AND state = ?",
                    (
                        time.time(),
                        json.dumps(error_record(error)),
                        qa,
                        0 if claimed else 1,
                        job_id,
                        n,
                        "running" if claimed else "queued",
                    ),
                ).rowcount
            )

    def release(self, key: Key, counted: bool = True) -> str | None:
        """running -> queued (it will run again), or -> cancelled if its job was cancelled. The new
        state. counted=False: its claim is not counted as an attempt (a drain handed it back)."""
        job_id, n = key
        now = time.time()
        with self.transaction() as db:
            cancelled = db.execute(
                "SELECT cancelled_at FROM jobs WHERE id = ?", (job_id,)
            ).fetchone()
            state = (
                "cancelled"
                if cancelled is not None and cancelled["cancelled_at"] is not None
                else "queued"
            )
            changed = db.execute(
                "UPDATE items SET state = ?, finished_at = ?, attempts = MAX(attempts - ?, 0) "
                "WHERE job_id = ? AND n = ? AND state = 'running'",
                (state, now if state == "cancelled" else None, 0 if counted else 1, job_id, n),
            ).rowcount
        return state if changed else None

    def recover(self) -> tuple[int, int]:
        """After a crash or a restart: running items whose final file exists -> done, those of a
        cancelled job -> cancelled, others -> queued.

            Also removes temporary files and result folders no job owns. Returns (done, queued).
        """
        num_done = num_queued = 0
        with self.transaction() as db:
            rows = db.execute(
                "SELECT i.job_id, i.n, i.format, j.cancelled_at FROM items i "
                "JOIN jobs j ON j.id = i.job_id WHERE i.state = 'running'"
            ).fetchall()
            for row in rows:
                path = self.result_path(row["job_id"], row["n"], row["format"])
                if path.is_file():  # renamed into place; the commit of `done` did not happen
                    db.execute(
                        "UPDATE items SET state = 'done', finished_at = ? WHERE job_id = ? AND n = ?",
                        (path.stat().st_mtime, row["job_id"], row["n"]),
                    )
                    num_done += 1
                elif row["cancelled_at"] is not None:  # cancelled just before the stop: not rerun
                    db.execute(
                        "UPDATE items SET state = 'cancelled', finished_at = ? "
                        "WHERE job_id = ? AND n = ?",
                        (row["cancelled_at"], row["job_id"], row["n"]),
                    )
                else:
                    db.execute(
                        "UPDATE items SET state = 'queued' WHERE job_id = ? AND n = ?",
                        (row["job_id"], row["n"]),
                    )
                    num_queued += 1
            known = {row["id"] for row in db.execute("SELECT id FROM jobs")}
        for folder in self.results.iterdir():
            if folder.name not in known:
                shutil.rmtree(folder, ignore_errors=True)
                continue
            for tmp in folder.glob(f".*{TMP_SUFFIX}"):
                tmp.unlink(missing_ok=True)
        return num_done, num_queued

    def sweep(self, retention_s: float, now: float | None = None) -> list[str]:
        """Remove jobs whose every item ended more than retention_s ago, with their results."""
        cutoff = (time.time() if now is None else now) - retention_s
        with self.transaction() as db:
            old = [
                row["job_id"]
                for row in db.execute(
                    "SELECT job_id FROM items GROUP BY job_id "
                    "HAVING SUM(state IN ('queued', 'running')) = 0 AND MAX(COALESCE(finished_at, 0)) < ?",
                    (cutoff,),
                )
            ]
            db.executemany("DELETE FROM jobs WHERE id = ?", ((job_id,) for job_id in old))
        for job_id in old:
            shutil.rmtree(self.results / job_id, ignore_errors=True)
        return old
