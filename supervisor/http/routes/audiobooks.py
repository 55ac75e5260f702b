"""`/v1/audiobooks`: a book in, its chapters made as one job, the whole book out as one file.

    POST /v1/audiobooks               multipart: `file` (EPUB, Markdown or text), the speech
                                      fields for every chapter, `response_format` m4b|mp3|opus,
                                      `loudness`, `title`, `author`, `captions`
                                      -> 202, the job (its items the chapters, each with `title`)
    GET  /v1/audiobooks/{id}          the job, each item with its chapter's `title`, and `book`
    GET  /v1/audiobooks/{id}/content  the whole book once every chapter is done (409 not_ready)

The book is read (`supervisor.books`), its chapters become the job's items in reading order
(`books.items`: a chapter too long for one request is several items, its parts), and the
items go through the jobs route's own checks (`job_items`), so a book is admitted exactly as
those requests would be; the first bad one is a 400 that names its chapter. The book's language
is the default `language`. The usual job routes follow, fetch (each chapter alone, with its
captions when asked) and cancel it. The book file is made as its chapters come
(`books.maker`), else on the first download of its content: levelled as a whole, with a mark
per chapter (`books.chaptered`), kept beside the job.
"""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
from dataclasses import asdict
from typing import Any

from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response

from supervisor.books import chaptered, items, maker, read, shelf
from supervisor.books.model import Book, BookError
from supervisor.errors import (
    Conflict,
    InsufficientStorage,
    InvalidRequest,
    NotFound,
    UnsupportedMedia,
)
from supervisor.http.auth import tenant
from supervisor.http.forms import parse_form
from supervisor.http.openapi_parts import (
    Parts,
    binary_content,
    error,
    form,
    json_ref,
    responses,
)
from supervisor.http.routes import jobs, services
from supervisor.jobs.item_fields import MAX_TITLE_CHARS
from supervisor.jobs.storage import body_digest, out_of_space
from supervisor.jobs.views import JobView
from supervisor.speech.audio import delivery
from supervisor.speech.request import schemas

SPEECH = schemas.SPEECH_FIELDS - {
    "input",
    "response_format",
    "stream_format",
    "duration",
    "sample_rate",
    "loudness",
    "dialogue",
}
BOOK_FIELDS = frozenset({"title", "author", "response_format", "loudness", "captions"})
FORM_FIELDS = SPEECH | BOOK_FIELDS | {"file"}
MAX_FIELD_BYTES = 64 * 1024
ITEM_PARAM = re.compile(r"^items\[(\d+)\]\.?")


def body_limit(_settings: Any) -> int:
    return read.MAX_BOOK_BYTES + 1024 * 1024


async def _form(request: Request) -> tuple[dict[str, str], bytes, str]:
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "multipart/form-data":
        raise UnsupportedMedia(
            "POST /v1/audiobooks takes a multipart form (multipart/form-data) with the book as "
            f"'file', not {content_type or 'a body without a Content-Type'}"
        )
    form = await parse_form(
        request, multipart=True, max_files=1, max_fields=64, max_part_size=MAX_FIELD_BYTES
    )
    try:
        fields: dict[str, str] = {}
        upload: UploadFile | None = None
        for key, value in form.multi_items():
            if key not in FORM_FIELDS:
                raise InvalidRequest(
                    f"Unrecognized form field {key!r}. Accepted: {', '.join(sorted(FORM_FIELDS))}.",
                    param=key,
                )
            if key == "file" and isinstance(value, UploadFile):
                upload = value
            elif isinstance(value, UploadFile) or key == "file":
                raise InvalidRequest(
                    f"{key!r} must be {'a file' if key == 'file' else 'text'}.", param=key
                )
            elif key in ("title", "author") and len(value) > MAX_TITLE_CHARS:
                raise InvalidRequest(
                    f"{key!r} is {len(value)} characters long; at most {MAX_TITLE_CHARS}.",
                    param=key,
                )
            else:
                fields[key] = value
        if upload is None:
            raise InvalidRequest("Missing required field: 'file' (the book).", param="file")
        data = await upload.read(read.MAX_BOOK_BYTES + 1)
        return fields, data, upload.filename or "book"
    finally:
        await form.close()


def _flag(raw: str, key: str) -> bool:
    if raw.lower() in ("true", "1", "yes", "on"):
        return True
    if raw.lower() in ("false", "0", "no", "off", ""):
        return False
    raise InvalidRequest(f"Invalid value for {key!r}: expected a boolean, got {raw!r}.", param=key)


def _known(language: str) -> bool:
    """Whether the model knows the book's language; one it does not is read as auto."""
    try:
        return schemas.language(language) is not None
    except InvalidRequest:
        return False


def _options(fields: dict[str, str], book: Book) -> tuple[dict[str, object], str, Any]:
    """The speech fields of every item, the book's format and its loudness target."""
    fmt = fields.get("response_format", "m4b").lower()
    if fmt not in chaptered.BOOK_FORMATS:
        raise InvalidRequest(
            f"'response_format' of a book is one of {', '.join(chaptered.BOOK_FORMATS)}; got {fmt!r}.",
            param="response_format",
        )
    raw = fields.get("loudness")
    target = chaptered.DEFAULT_TARGET
    if raw:
        try:
            value = json.loads(raw) if raw.lstrip().startswith("{") else raw
        except ValueError:
            raise InvalidRequest("'loudness' is not valid JSON.", param="loudness") from None
        target = delivery.parse_loudness(value) or target
    speech = schemas.from_form({k: v for k, v in fields.items() if k in SPEECH})
    if "captions" in fields:
        speech["captions"] = _flag(fields["captions"], "captions")
    if "language" not in speech and book.language and _known(book.language):
        speech["language"] = book.language
    return {k: v for k, v in speech.items() if v is not None}, fmt, target


def _located(error: InvalidRequest, spans: list[items.Span]) -> InvalidRequest:
    """An item's error as its chapter's: "chapter 2 ("The Market"): ..." on the form field."""
    match = ITEM_PARAM.match(error.param or "")
    if match is None:
        return error
    n = int(match.group(1))
    number, span = next((i, s) for i, s in enumerate(spans, 1) if s.first <= n < s.first + s.count)
    field = (error.param or "")[match.end() :]
    message = error.message.split(": ", 1)[-1]
    moved = InvalidRequest(
        f'chapter {number} ("{span.title}"): {message}',
        param=field if field in FORM_FIELDS and field != "input" else "file",
    )
    moved.code = error.code
    return moved


def _with_titles(job: JobView, record: shelf.Record) -> dict[str, object]:
    view: dict[str, object] = dict(job)
    chapter_of = {
        n: (number, span.title)
        for number, span in enumerate(record.chapters)
        for n in range(span.first, span.first + span.count)
    }
    view["items"] = [
        {**item, "chapter": chapter_of[item["index"]][0], "title": chapter_of[item["index"]][1]}
        for item in job.get("items", [])
    ]
    view["book"] = {
        "title": record.title,
        "author": record.author,
        "language": record.language,
        "format": record.format,
        "chapters": [
            {"title": span.title, "items": list(range(span.first, span.first + span.count))}
            for span in record.chapters
        ],
        "content_url": f"/v1/audiobooks/{job['id']}/content",
    }
    return view


def _admitted(request: Request, fields: dict[str, str], book: Book) -> tuple[Any, shelf.Record]:
    """The job's items as the jobs route checks them, and the book's record (off the loop)."""
    settings = services(request).settings.speech
    speech, fmt, target = _options(fields, book)
    planned, spans = items.plan(
        book, speech, settings.max_input_chars, settings.max_request_audio_s
    )
    try:
        checked = jobs.job_items({"items": planned}, request)
    except InvalidRequest as exc:
        raise _located(exc, spans) from None
    record = shelf.Record(
        fields.get("title") or book.title,
        fields.get("author") or book.author,
        book.language,
        fmt,
        target,
        spans,
        book.cover_type,
    )
    return checked, record


def _key(request: Request) -> str | None:
    key = request.headers.get("idempotency-key")
    if key is not None and not 0 < len(key) <= jobs.MAX_KEY_CHARS:
        raise InvalidRequest(
            f"Idempotency-Key must be 1 to {jobs.MAX_KEY_CHARS} characters.",
            param="Idempotency-Key",
        )
    return key


async def _stored(request: Request, checked: Any, record: shelf.Record) -> tuple[str, bool]:
    """The job committed (or the one an Idempotency-Key made with the same book and fields)."""
    items_, when, digest = checked
    # the book's own fields too: the same chapters as another format are another book
    whole = body_digest({"items": digest, "book": asdict(record)})
    try:
        return await jobs.store(request).create(
            items_, whole, _key(request), when, tenant(request).owner
        )
    except (OSError, sqlite3.OperationalError) as exc:
        if not out_of_space(exc):
            raise
        raise InsufficientStorage(
            f"the book cannot be stored: the server's disk is full ({exc})",
            retry_after_s=jobs.STORAGE_RETRY_S,
        ) from None


async def create_audiobook(request: Request) -> JSONResponse:
    runner = jobs.runner(request)
    _key(request)
    fields, data, filename = await _form(request)
    book = await asyncio.to_thread(read.read, data, filename)
    checked, record = await asyncio.to_thread(_admitted, request, fields, book)
    job_id, created = await _stored(request, checked, record)
    data_dir = services(request).settings.resolved_data_dir()
    headers = {"Location": f"/v1/audiobooks/{job_id}"}
    if created:
        await asyncio.to_thread(shelf.save, data_dir, job_id, record, book.cover)
        encoders = services(request).settings.jobs.book_encoders
        maker.start(data_dir, job_id, runner.store, encoders)  # made as the chapters come
        await runner.refresh_outlook()
        runner.wake()
        await asyncio.to_thread(
            shelf.tidy, data_dir, lambda other: runner.store.job(other, False) is not None
        )
    else:
        headers["Idempotent-Replayed"] = "true"
    job = runner.with_outlook(await jobs.store(request).job(job_id))
    return JSONResponse(_with_titles(job, record), status_code=202, headers=headers)


async def book_of(request: Request, with_items: bool) -> tuple[JobView, shelf.Record, str]:
    job_id = request.path_params["job_id"]
    job = await jobs.store(request).job(job_id, with_items, tenant(request).scope)
    if job is None:
        raise jobs.no_job(job_id)
    data_dir = services(request).settings.resolved_data_dir()
    found = await asyncio.to_thread(shelf.load, data_dir, job_id)
    if found is None:
        raise NotFound(
            f"Job {job_id} is not an audiobook (or its book record is gone).", param="job_id"
        )
    return job, found[0], data_dir


async def get_audiobook(request: Request) -> JSONResponse:
    job, record, _ = await book_of(request, True)
    return JSONResponse(_with_titles(jobs.runner(request).with_outlook(job), record))


async def audiobook_content(request: Request) -> Response:
    job, record, data_dir = await book_of(request, False)
    if job["state"] != "completed":
        progress = job["progress"]
        error = Conflict(
            f"Audiobook {job['id']} is {job['state']} ({progress['done']} of {progress['total']} "
            "items done); its file exists once every chapter is done.",
            param="job_id",
        )
        error.code = "not_ready"
        raise error
    store = jobs.runner(request).store
    await maker.settled(job["id"])  # the book made as its chapters came, or dropped
    try:
        path, _ = await asyncio.to_thread(
            shelf.make,
            data_dir,
            job["id"],
            lambda n: store.read_result(job["id"], n, items.ITEM_FORMAT),
            services(request).settings.jobs.book_encoders,
        )
    except (shelf.ChapterGone, BookError) as exc:
        raise NotFound(f"Audiobook {job['id']} cannot be made: {exc}", param="job_id") from None
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", record.title).strip("-.") or "book"
    return FileResponse(
        path, media_type=chaptered.MEDIA_TYPES[record.format], filename=f"{name}.{record.format}"
    )


# ------------------------------------------------------------------ OpenAPI and the route table


def _create_operation(p: Parts) -> dict[str, object]:
    speech = {k: v for k, v in p.options.items() if k in SPEECH}
    properties = {
        **speech,
        "file": {"type": "string", "format": "binary", "description": read.KNOWN},
        "response_format": {
            "type": "string",
            "enum": list(chaptered.BOOK_FORMATS),
            "default": "m4b",
        },
        "loudness": {
            "type": "string",
            "description": 'a preset ("podcast", "broadcast", "acx") or {"lufs": L, "true_peak_db": P} '
            "as JSON, for the whole book (default -18 LUFS, -3 dBTP)",
        },
        "title": {"type": "string"},
        "author": {"type": "string"},
        "captions": {"type": "boolean", "description": "each chapter's captions beside its audio"},
    }
    return {
        "operationId": "createAudiobook",
        "summary": "A book in, its chapters made as one job (docs/AUDIOBOOKS.md)",
        "parameters": [
            {
                "name": "Idempotency-Key",
                "in": "header",
                "required": False,
                "schema": {"type": "string", "minLength": 1, "maxLength": jobs.MAX_KEY_CHARS},
            }
        ],
        "requestBody": {
            "required": True,
            "content": {"multipart/form-data": {"schema": form(properties, ["file"])}},
        },
        "responses": {
            "202": json_ref("Job", "the job, its items the chapters, each with its title"),
            **{str(s): error(s) for s in (400, 401, 409, 413, 415, 503, 507)},
        },
    }


def _get_operation(p: Parts) -> dict[str, object]:
    return {
        "operationId": "getAudiobook",
        "responses": responses(json_ref("Job", "the job, its items with titles, and `book`"), 404),
    }


def _content_operation(p: Parts) -> dict[str, object]:
    return {
        "operationId": "getAudiobookContent",
        "summary": "The whole book as one chaptered file, once every chapter is done",
        "responses": responses(
            {
                "description": "the book",
                "content": binary_content(chaptered.MEDIA_TYPES.values()),
            },
            404,
            409,
        ),
    }


# (path, method, handler, OpenAPI operation, body limit): supervisor/http/route_table.py's rows
ROUTES = (
    ("/v1/audiobooks", "POST", create_audiobook, _create_operation, body_limit),
    ("/v1/audiobooks/{job_id}", "GET", get_audiobook, _get_operation, None),
    ("/v1/audiobooks/{job_id}/content", "GET", audiobook_content, _content_operation, None),
)
