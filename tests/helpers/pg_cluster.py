"""A real PostgreSQL server for tests: Debian's binaries, a cluster in a temporary directory.

`Cluster.start(dir)` runs initdb and starts `postgres` on a free port of 127.0.0.1 (trust
authentication, nothing listening elsewhere). PostgreSQL refuses to run as root, so as root the
cluster belongs to `nobody` and its programs run through `runuser`. `stop()` and `start_again()`
stop and restart the same cluster (the tests of a stopped database); `new_database()` gives each
test its own database.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg

from tests.helpers.ports import free_port

BIN_DIRS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)  # newest first
RUN_AS = "nobody"


def binaries() -> Path | None:
    """The directory of initdb and pg_ctl, or None where PostgreSQL is not installed."""
    found = [d for d in BIN_DIRS if (d / "initdb").is_file() and (d / "pg_ctl").is_file()]
    if found:
        return found[0]
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


class Cluster:
    def __init__(self, bin_dir: Path, data: Path, port: int) -> None:
        self.bin_dir, self.data, self.port = bin_dir, data, port
        self.url = f"postgresql://postgres@127.0.0.1:{port}/postgres"

    def _run(self, program: str, *args: str) -> None:
        argv = [str(self.bin_dir / program), *args]
        if os.geteuid() == 0:
            argv = ["runuser", "-u", RUN_AS, "--", *argv]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{program} failed ({done.returncode}): {done.stdout}{done.stderr}")

    @classmethod
    def start(cls, bin_dir: Path, root: Path) -> Cluster:
        if os.geteuid() == 0:
            shutil.chown(root, RUN_AS)
            root.chmod(0o755)
        cluster = cls(bin_dir, root / "pgdata", free_port())
        cluster._run(
            "initdb",
            "-D",
            str(cluster.data),
            "-U",
            "postgres",
            "--auth=trust",
            "--no-sync",
            "-E",
            "UTF8",
        )
        cluster.start_again()
        return cluster

    def start_again(self) -> None:
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.data} -c fsync=off "
            "-c max_connections=200"
        )
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-o",
            options,
            "-l",
            str(self.data / "log"),
            "-w",
            "-t",
            "60",
            "start",
        )

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "-t", "60", "stop")

    def new_database(self) -> str:
        """A fresh, empty database; its URL."""
        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url.rsplit("/", 1)[0] + "/" + name

    def terminate(self, application_prefix: str) -> int:
        """Cut every connection whose application_name starts so (pg_terminate_backend)."""
        with psycopg.connect(self.url, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name LIKE %s AND pid <> pg_backend_pid()",
                (application_prefix + "%",),
            ).fetchall()
        return len(rows)


@contextlib.contextmanager
def running() -> Iterator[Cluster | None]:
    """A started cluster (None without PostgreSQL), stopped and removed on the way out. Its
    folder is a new one in the system's temporary directory: pytest's are private to root, and
    the cluster's user must reach it."""
    bin_dir = binaries()
    if bin_dir is None:
        yield None
        return
    root = Path(tempfile.mkdtemp(prefix="omnivoice-pg-"))
    try:
        cluster = Cluster.start(bin_dir, root)
        try:
            yield cluster
        finally:
            with contextlib.suppress(RuntimeError):
                cluster.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
