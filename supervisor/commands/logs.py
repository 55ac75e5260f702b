"""Logging for the supervisor: one format, to stderr and optionally to a file; the --log-dir layout.

Sidecar stderr arrives through the `omnivoice.sidecar` logger, each line tagged with the
sidecar's id and pid by process.py.

With --log-dir, each start is a run with a folder of its own, as omnivoice-triton-server lays
them out:

    DIR/<run id>/server.log    the log (unless --log-file names another file)
    DIR/<run id>/server.pid    the pid file (unless --pid-file names another file)
    DIR/latest -> <run id>     replaced at each start, so DIR/latest/server.log is always the current run

The run id is --log-run-id, else the start time (YYYYmmdd-HHMMSS, with -2, -3… if a folder of
that name exists). The paths are resolved once, at start, into the settings in effect (so
/health shows them). Nothing is rotated or removed: a run's log lives as long as its server.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import time
from pathlib import Path

from supervisor.settings import ServerSettings, Settings

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
LOG_FILE = "server.log"
PID_FILE = "server.pid"
LATEST = "latest"

log = logging.getLogger("omnivoice.logs")


def new_run_id(root: Path) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    run_id, n = stamp, 1
    while (root / run_id).exists():
        n += 1
        run_id = f"{stamp}-{n}"
    return run_id


def point_latest(root: Path, run_id: str) -> None:
    """Make root/latest a relative symlink to run_id, atomically (a new link renamed over the old)."""
    temporary = root / f".{LATEST}.{os.getpid()}"
    with contextlib.suppress(FileNotFoundError):
        temporary.unlink()
    os.symlink(run_id, temporary)
    try:
        os.replace(temporary, root / LATEST)
    except OSError:
        temporary.unlink()
        raise


def latest_pid_file(log_dir: str) -> str:
    """The pid file of the newest run under --log-dir (what `stop --log-dir` reads)."""
    return str(Path(log_dir).expanduser().absolute() / LATEST / PID_FILE)


def prepare(settings: Settings) -> Settings:
    """The settings with the run's paths filled in; the run folder made and DIR/latest pointed at it."""
    if not settings.log_dir:
        return settings
    root = (
        Path(settings.log_dir).expanduser().absolute()
    )  # /health and the log show where the files are, whatever the cwd
    root.mkdir(parents=True, exist_ok=True)
    run_id = settings.log_run_id or new_run_id(root)
    run = root / run_id
    run.mkdir(exist_ok=True)
    point_latest(root, run_id)
    return dataclasses.replace(
        settings,
        log_run_id=run_id,
        log_file=settings.log_file or str(run / LOG_FILE),
        pid_file=settings.pid_file or str(run / PID_FILE),
    )


def setup_logging(settings: ServerSettings) -> None:
    handlers: list[logging.Handler] = [logging.StreamHandler()]
    if settings.log_file:
        path = Path(settings.log_file).expanduser()
        path.parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(path))
    logging.basicConfig(
        level=settings.log_level.upper(), format=FORMAT, handlers=handlers, force=True
    )
    if settings.log_dir:
        log.info(
            "run %s: log %s, pid file %s; %s points at it",
            settings.log_run_id,
            settings.log_file,
            settings.pid_file,
            Path(settings.log_dir).expanduser().absolute() / LATEST,
        )
