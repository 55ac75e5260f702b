"""`/v1/jobs`: hand over a list of speech requests, follow it, fetch each result, cancel it.

    POST   /v1/jobs                        {"items": [<speech request, optional "id">, ...],
                                            "not_before", "deadline", "callback_url"}
                                           -> 202, the job
    GET    /v1/jobs?limit=20&after=JOB_ID  jobs, newest first, without their items
    GET    /v1/jobs/{id}                   the job and every item's state, attempts and error
    GET    /v1/jobs/{id}/items/{n}/audio   item n's result (0-based), once it is done
    DELETE /v1/jobs/{id}                   cancel: queued items end cancelled; finished results stay

Each item is checked exactly as the speech route checks a request (the same fields, the same
messages, `param` prefixed with `items[n].`), its text is read as it will be read (SSML, lexicon,
normalisation) and its cost checked (`supervisor.speech.synthesis.cost`), and its voice must exist, so a job that is
accepted will not fail on a typo hours later. The job is committed to the store (the data
directory, or PostgreSQL) before the 202 goes out. `Idempotency-Key` (a header): the same key with the same body answers the job it created
the first time (`Idempotent-Replayed: true`); with a different body, 409.

A job is its API key's (supervisor.tenants): another key's request finds no such job (404),
and an Idempotency-Key is the key's own. An admin key finds every job.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import sqlite3
from collections.abc import Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from sidecar.shared.tiers import Tier
from supervisor.errors import Conflict, InsufficientStorage, InvalidRequest, NotFound, Unavailable
from supervisor.http.auth import tenant
from supervisor.http.routes import services
from supervisor.http.routes.speech import read_json
from supervisor.jobs import body as job_body
from supervisor.jobs import schedule
from supervisor.jobs.access import JobAccess
from supervisor.jobs.finish_times import item_audio_s
from supervisor.jobs.item_fields import ItemFields
from supervisor.jobs.runner import JobRunner
from supervisor.jobs.schedule import JobSchedule
from supervisor.jobs.storage import NewItem, body_digest, out_of_space
from supervisor.jobs.views import ItemView
from supervisor.speech.audio import formats
from supervisor.speech.checks import word_timestamps
from supervisor.speech.request import aliases, body_errors, schemas
from supervisor.speech.stores.voices import resolve_voice
from supervisor.speech.synthesis import cost, script

CAPTION_TYPES = {"srt": "application/x-subrip", "vtt": "text/vtt"}

MAX_KEY_CHARS = 255
MAX_PAGE = 100
BODY_CAP = 64 * 2**20  # a job's JSON body, whatever --max-job-items allows
STORAGE_RETRY_S = 30  # Retry-After of a job refused for a full disk


def runner(request: Request) -> JobRunner:
    jobs: JobRunner | None = request.app.state.jobs
    if jobs is None:
        reason = request.app.state.jobs_health["error"]
        error = Unavailable(f"jobs are unavailable: {reason}. Speech requests still work.")
        error.code = "job_store_corrupt"
        raise error
    return jobs


def store(request: Request) -> JobAccess:
    """The job store, each call off the event loop."""
    return JobAccess(runner(request).store)


def located(error: InvalidRequest, index: int) -> InvalidRequest:
    """The same error, saying which item it is about."""
    param = f"items[{index}]" + (f".{error.param}" if error.param else "")
    moved = type(error)(f"items[{index}]: {error.message}", param=param)
    moved.code = error.code
    return moved


def as_digested(
    client_id: str | None, fields: Mapping[str, object], speech: schemas.SpeechRequest
) -> dict[str, object]:
    """An item as its job's digest reads it: the request as validated, its captions only when
    on, its title and word timing only when sent, and its tier only when not the default
    (flex), so that the digests of jobs stored before any of them existed stay the same."""
    own: dict[str, object] = {"captions": True} if fields.get("captions") is True else {}
    if "timestamp_granularities" in fields:
        own["timestamp_granularities"] = fields["timestamp_granularities"]
    if fields.get("title") is not None:
        own["title"] = fields["title"]
    as_read = dataclasses.asdict(speech)
    if speech.tier is Tier.BULK:
        del as_read["tier"]
    return {"id": client_id, **own, **as_read}


def job_items(body: Any, request: Request) -> tuple[list[NewItem], JobSchedule, str]:
    """The body's items as they will be stored, its schedule, and the digest Idempotency-Key
    compares: that of the validated requests and schedule, so `"speed": 1` and `"speed": 1.0` are
    the same job. InvalidRequest names the first bad item or field."""
    svc = services(request)
    if not isinstance(body, dict):
        raise InvalidRequest('The request body must be a JSON object {"items": [...]}.')
    aliases.refuse_unknown(body, job_body.FIELDS)
    when = schedule.job_schedule(body, svc.settings.jobs.callback_allow)
    items = body.get("items")
    if not isinstance(items, list) or not items:
        raise InvalidRequest("'items' must be a non-empty array of speech requests.", param="items")
    if len(items) > svc.settings.http.max_job_items:
        raise InvalidRequest(
            f"A job takes at most {svc.settings.http.max_job_items} items; this one has {len(items)}.",
            param="items",
        )
    seen: dict[str, int] = {}
    out, validated = [], []
    for index, item in enumerate(items):
        try:
            if not isinstance(item, dict):
                raise InvalidRequest(
                    "An item must be a JSON object (a speech request with an optional 'id')."
                )
            # An item's own fields: its id, .srt and .vtt beside its audio, by sentence or by word.
            client_id = body_errors.validated(ItemFields, item).id
            if client_id is not None:
                if client_id in seen:
                    raise InvalidRequest(
                        f"'id' {client_id!r} is also the id of items[{seen[client_id]}]; ids must be unique.",
                        param="id",
                    )
                seen[client_id] = index
            fields = {key: value for key, value in item.items() if key != "id"}
            word_timestamps.item_wants_words(fields, svc.asr)
            speech = schemas.speech_request(
                {k: v for k, v in fields.items() if k not in word_timestamps.ITEM_FIELDS},
                svc.settings.speech,
                default_tier=schemas.JOB_TIER,
            )
            if speech.stream_format == "sse":
                raise InvalidRequest(
                    "A job item is a whole file: 'stream_format' \"sse\" is for /v1/audio/speech.",
                    param="stream_format",
                )
            resolve_voice(speech, svc.voices_for(tenant(request)))
            # Read as it will be read when it runs: a number the normaliser cannot spell, or a
            # text or audio past its limits, is a 400 now, not a failed item later.
            read = script.read(
                speech, svc.settings.speech, svc.lexicons_for(tenant(request)).for_request(speech)
            )
            cost.check(cost.estimate(read, speech), svc.settings.speech, svc.scheduler.capacity)
        except InvalidRequest as exc:
            raise located(exc, index) from None
        estimate = item_audio_s(speech.input, speech.speed, speech.duration)
        out.append(NewItem(fields, client_id, speech.response_format, estimate))
        validated.append(as_digested(client_id, fields, speech))
    # Without schedule fields, the digest of before they existed: old keys still match.
    digest = body_digest({"items": validated, **when.fields()} if when.fields() else validated)
    return out, when, digest


async def create_job(request: Request) -> JSONResponse:
    jobs = runner(request)
    key = request.headers.get("idempotency-key")
    if key is not None and not 0 < len(key) <= MAX_KEY_CHARS:
        raise InvalidRequest(
            f"Idempotency-Key must be 1 to {MAX_KEY_CHARS} characters.", param="Idempotency-Key"
        )
    max_items = services(request).settings.http.max_job_items
    body = await read_json(request, functools.partial(job_body.parse, max_items=max_items))
    # 10,000 items take a while to check: off the event loop
    items, when, digest = await asyncio.to_thread(job_items, body, request)
    try:
        job_id, created = await store(request).create(
            items, digest, key, when, tenant(request).owner
        )
    except (OSError, sqlite3.OperationalError) as exc:
        if not out_of_space(exc):
            raise
        raise InsufficientStorage(
            f"the job cannot be stored: the server's disk is full ({exc})",
            retry_after_s=STORAGE_RETRY_S,
        ) from None
    if created:
        await jobs.refresh_outlook()
        jobs.wake()
    job = jobs.with_outlook(await store(request).job(job_id))
    headers = {"Location": f"/v1/jobs/{job_id}"}
    if not created:
        headers["Idempotent-Replayed"] = "true"
    return JSONResponse(job, status_code=202, headers=headers)


async def list_jobs(request: Request) -> JSONResponse:
    raw = request.query_params.get("limit", "20")
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_PAGE:
        raise InvalidRequest(
            f"'limit' must be an integer from 1 to {MAX_PAGE}; got {raw!r}.", param="limit"
        )
    jobs = runner(request)
    page, has_more = await store(request).jobs_page(
        int(raw), request.query_params.get("after"), tenant(request).scope
    )
    page = [jobs.with_outlook(job) for job in page]
    return JSONResponse(
        {
            "object": "list",
            "data": page,
            "has_more": has_more,
            "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None,
        }
    )


def no_job(job_id: str) -> NotFound:
    error = NotFound(
        f"No job {job_id!r}: it never existed, or was removed after its retention.", param="job_id"
    )
    error.code = "job_not_found"
    return error


# Why an item that is not done has no audio, by its state.
NO_AUDIO_YET = {
    "queued": "its audio exists once it is done.",
    "running": "its audio exists once it is done.",
    "failed": "it has no audio; its error is in GET /v1/jobs/{id}.",
    "cancelled": "it was cancelled before it finished, so it has no audio.",
}
# A cancel answers once its running items ended (cancelled at once, or written).
CANCEL_WAIT_S = 10.0


async def get_job(request: Request) -> JSONResponse:
    job_id = request.path_params["job_id"]
    jobs = runner(request)
    job = await store(request).job(job_id, True, tenant(request).scope)
    if job is None:
        raise no_job(job_id)
    return JSONResponse(jobs.with_outlook(job))


async def owned_item(request: Request, job_id: str, raw: str) -> ItemView:
    """Item `raw` of a job of the request's key; 404 for no such job, or no such item."""
    owner = tenant(request).scope
    # Only ASCII digits that fit SQLite's integers can name an item ("²" and 10**30 cannot).
    index = int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 18 else None
    item = None
    if index is not None:
        item = await store(request).item(job_id, index, owner)
    if item is None:
        if await store(request).job(job_id, False, owner) is None:
            raise no_job(job_id)
        raise NotFound(f"Job {job_id} has no item {raw}: items are numbered from 0.", param="n")
    return item


async def item_audio(request: Request) -> Response:
    job_id, raw = request.path_params["job_id"], request.path_params["n"]
    item = await owned_item(request, job_id, raw)
    if item["state"] != "done":
        why = NO_AUDIO_YET[item["state"]]
        error = Conflict(f"Item {raw} of job {job_id} is {item['state']}; {why}", param="n")
        error.code = "item_not_done"
        raise error
    data = await store(request).read_result(job_id, item["index"], item["format"])
    if data is None:
        raise NotFound(
            f"The result of item {raw} of job {job_id} is gone from the data directory.", param="n"
        )
    name = f"{item['id'] or item['index']}.{item['format']}"  # ITEM_ID: nothing to quote
    return Response(
        data,
        media_type=formats.MEDIA_TYPES[item["format"]],
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )


async def item_captions(request: Request) -> Response:
    """`captions.srt` or `captions.vtt` of an item that asked for captions, once it is done."""
    job_id, raw = request.path_params["job_id"], request.path_params["n"]
    kind = request.url.path.rsplit(".", 1)[1]
    item = await owned_item(request, job_id, raw)
    if item["state"] != "done":
        error = Conflict(
            f"Item {raw} of job {job_id} is {item['state']}; its captions exist once it is done.",
            param="n",
        )
        error.code = "item_not_done"
        raise error
    data = await store(request).read_beside(job_id, item["index"], kind)
    if data is None:
        raise NotFound(
            f'Item {raw} of job {job_id} has no captions: send the item with "captions": true.',
            param="n",
        )
    name = f"{item['id'] or item['index']}.{kind}"
    return Response(
        data,
        media_type=CAPTION_TYPES[kind],
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )


async def cancel_job(request: Request) -> JSONResponse:
    jobs, job_id = runner(request), request.path_params["job_id"]
    if not await store(request).cancel(job_id, tenant(request).scope):
        raise no_job(job_id)
    await jobs.cancel_job(job_id, CANCEL_WAIT_S)
    jobs.wake()  # its callback, if it has one
    return JSONResponse(jobs.with_outlook(await store(request).job(job_id, False)))
