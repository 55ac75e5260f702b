"""Logging for the supervisor: one format, to stderr and optionally to a file in --log-dir.

Sidecar stderr arrives through the `omnivoice.sidecar` logger, each line tagged with the
sidecar's id and pid by process.py.
"""

from __future__ import annotations

import logging
import os

from supervisor.settings import Settings

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
LOG_FILE = "omnivoice-supervisor.log"


def setup_logging(settings: Settings) -> None:
    handlers: list[logging.Handler] = [logging.StreamHandler()]
    if settings.log_dir:
        os.makedirs(settings.log_dir, exist_ok=True)
        handlers.append(logging.FileHandler(os.path.join(settings.log_dir, LOG_FILE)))
    logging.basicConfig(level=settings.log_level.upper(), format=FORMAT, handlers=handlers, force=True)
