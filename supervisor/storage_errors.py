"""Failures of the server's own storage, as the errors a request ends with.

A full disk (or quota), a read-only or failing one (EIO) under the data directory is not the
request's fault and not a bug: it is a 507 `insufficient_storage`, retryable once an operator
has made room, on every route that writes. Anything else stays a 500.
"""

from __future__ import annotations

import errno
import sqlite3

from supervisor.errors import InsufficientStorage, ServerError

STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS})
STORAGE_RETRY_S = 30  # Retry-After: as a job refused for a full disk
PG_DISK_FULL = "53100"  # PostgreSQL's disk_full


def is_storage_failure(exc: BaseException) -> bool:
    """Whether an exception (or the one it was raised from) says the storage failed."""
    for found in (exc, exc.__cause__):
        if isinstance(found, OSError) and found.errno in STORAGE_ERRNOS:
            return True
        if isinstance(found, sqlite3.OperationalError) and (
            "full" in str(found) or "disk I/O" in str(found)
        ):
            return True
        if getattr(found, "sqlstate", None) == PG_DISK_FULL:
            return True
    return False


def storage_error(exc: BaseException, failed: str) -> ServerError:
    """`failed` ("the lexicon could not be saved") and why: a 507 for a storage failure, else
    a 500."""
    why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    if is_storage_failure(exc):
        return InsufficientStorage(
            f"{failed}: the server's storage failed ({why}); retry once it has room",
            retry_after_s=STORAGE_RETRY_S,
        )
    return ServerError(f"{failed}: {why}")
