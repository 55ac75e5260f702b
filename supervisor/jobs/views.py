"""Rows into the API's job and item objects: one rendering, used by both job stores."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from supervisor.jobs.schedule import rfc3339
from supervisor.jobs.storage import ITEM_STATES, ErrorRecord
from supervisor.qa_summary import QaSummary
from supervisor.tracing import spans

if TYPE_CHECKING:
    from supervisor.jobs.full_disk import FullDiskReport
    from supervisor.jobs.warm_up import WarmUpReport

# A job's progress: per item state, how many, the most attempts, the last end (%s: the job id).
PROGRESS_SQL = (
    "SELECT state, COUNT(*) AS count, MAX(attempts) AS attempted, MAX(finished_at) AS last_end "
    "FROM items WHERE job_id = %s GROUP BY state"
)


class CallbackView(TypedDict):
    state: str  # pending, delivered or failed
    attempts: int
    last_status: int | None
    last_error: str | None


class ItemView(TypedDict):
    index: int
    id: str | None  # the client's
    state: str  # one of ITEM_STATES
    attempts: int
    format: str
    started_at: float | None
    finished_at: float | None
    error: ErrorRecord | None  # as stored
    seed: int | None
    audio_seconds: float | None
    qa: QaSummary | None
    audio_url: str | None
    trace_id: str  # its spans' trace, the same for every attempt (supervisor/tracing/spans.py)
    title: str | None  # the item's own `title`, if it was sent one


class _JobViewBase(TypedDict):
    id: str
    object: Literal["job"]
    owner: str
    state: str  # queued, running, completed, failed or cancelled
    created_at: float
    finished_at: float | None
    cancelled_at: float | None
    progress: dict[str, int]  # "total", and each of ITEM_STATES
    not_before: str | None  # RFC 3339
    deadline: str | None
    callback_url: str | None
    callback: CallbackView | None


class JobView(_JobViewBase, total=False):
    """A job as the API shows it: the store's view, and what the runner adds to it."""

    items: list[ItemView]  # unless the store was asked for the job alone
    estimated_finish: str | None  # the runner's outlook (supervisor/jobs/finish_estimates.py)
    deadline_at_risk: bool
    warm_up: WarmUpReport | None  # the warm-up for it, while one is under way
    waiting_for_space: FullDiskReport | None  # while a full disk holds the items back


def job_view(
    row: Mapping[str, Any] | sqlite3.Row, progress_rows: Iterable[Sequence[Any]]
) -> JobView:
    """A job as the API shows it, from its row and PROGRESS_SQL's rows (both stores use it)."""
    progress = {state: 0 for state in ITEM_STATES}
    started, last_end = False, None
    for state, count, attempted, finished_at in progress_rows:
        progress[state] = count
        started = started or attempted > 0 or state != "queued"
        if finished_at is not None:
            last_end = max(last_end or 0.0, finished_at)
    unfinished = progress["queued"] + progress["running"]
    if row["cancelled_at"] is not None:
        state = "cancelled"
    elif unfinished:
        state = "running" if started else "queued"
    else:
        state = "failed" if progress["failed"] else "completed"
    return {
        "id": row["id"],
        "object": "job",
        "owner": row["owner"],  # whose job: an admin key's listing shows every owner's
        "state": state,
        "created_at": row["created_at"],
        "finished_at": None if unfinished else last_end,
        "cancelled_at": row["cancelled_at"],
        "progress": {"total": sum(progress.values()), **progress},
        "not_before": rfc3339(row["not_before"]),
        "deadline": rfc3339(row["deadline"]),
        "callback_url": row["callback_url"],
        "callback": None
        if row["callback_state"] is None
        else {
            "state": row["callback_state"],
            "attempts": row["callback_attempts"],
            "last_status": row["callback_status"],
            "last_error": row["callback_error"],
        },
    }


def item_view(job_id: str, item: Mapping[str, Any] | sqlite3.Row) -> ItemView:
    """An item as the API shows it, from its row (both stores use it)."""
    return {
        "index": item["n"],
        "id": item["client_id"],
        "state": item["state"],
        "attempts": item["attempts"],
        "format": item["format"],
        "started_at": item["started_at"],
        "finished_at": item["finished_at"],
        "error": json.loads(item["error"]) if item["error"] else None,
        "seed": item["seed"],
        "audio_seconds": item["audio_s"],
        "qa": json.loads(item["qa"]) if item["qa"] else None,
        "audio_url": f"/v1/jobs/{job_id}/items/{item['n']}/audio"
        if item["state"] == "done"
        else None,
        "trace_id": format(spans.item_trace_id(job_id, item["n"]), "032x"),
        "title": _title(item["request"]),
    }


def _title(request: str) -> str | None:
    """The item's `title`; the request is parsed only when it may hold one."""
    if '"title"' not in request:
        return None
    title = json.loads(request).get("title")
    return title if isinstance(title, str) else None
