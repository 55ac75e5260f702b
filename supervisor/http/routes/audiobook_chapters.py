"""One chapter of an audiobook as one file, its parts joined (`supervisor.books.chapters`).

    GET /v1/audiobooks/{id}/chapters/{n}/audio          FLAC, once the chapter's items are done
    GET /v1/audiobooks/{id}/chapters/{n}/captions.srt   with captions=true; also .vtt

`n` counts chapters from 0, as the items' `chapter` does. A chapter made as one item is that
item's result; one made as several (a chapter longer than one request may be) is joined here,
its captions moved on by each part's audio. 409 `item_not_done` until every part is done.
"""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from supervisor.books import chapters, items
from supervisor.errors import Conflict, NotFound
from supervisor.http.openapi_parts import Parts, responses
from supervisor.http.routes import audiobooks, jobs
from supervisor.jobs.views import ItemView

CAPTION_TYPES = {"srt": "application/x-subrip", "vtt": "text/vtt"}


async def _chapter(request: Request) -> tuple[str, int, list[ItemView]]:
    """The book's id, the chapter's number and its items, every one of them done."""
    job, record, _ = await audiobooks.book_of(request, True)
    raw = request.path_params["n"]
    if not (raw.isascii() and raw.isdigit() and int(raw) < len(record.chapters)):
        raise NotFound(
            f"Audiobook {job['id']} has no chapter {raw}: its {len(record.chapters)} chapters are "
            "numbered from 0.",
            param="n",
        )
    span = record.chapters[int(raw)]
    parts = job.get("items", [])[span.first : span.first + span.count]
    waiting = [item for item in parts if item["state"] != "done"]
    if waiting:
        error = Conflict(
            f"Chapter {raw} of audiobook {job['id']} is not done: item {waiting[0]['index']} is "
            f"{waiting[0]['state']}.",
            param="n",
        )
        error.code = "item_not_done"
        raise error
    return job["id"], int(raw), parts


async def chapter_audio(request: Request) -> Response:
    job_id, number, parts = await _chapter(request)
    store = jobs.runner(request).store
    results = []
    for item in parts:
        data = await asyncio.to_thread(store.read_result, job_id, item["index"], item["format"])
        if data is None:
            raise NotFound(f"The result of item {item['index']} is gone from the job store.")
        results.append(data)
    joined = (
        results[0] if len(results) == 1 else await asyncio.to_thread(chapters.joined_audio, results)
    )
    name = f"chapter-{number + 1:03d}.{items.ITEM_FORMAT}"
    return Response(
        joined,
        media_type="audio/flac",
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )


async def chapter_captions(request: Request) -> Response:
    job_id, number, parts = await _chapter(request)
    kind = request.url.path.rsplit(".", 1)[1]
    store = jobs.runner(request).store
    texts = []
    for item in parts:
        data = await asyncio.to_thread(store.read_beside, job_id, item["index"], kind)
        if data is None:
            raise NotFound(
                f"Chapter {number} of audiobook {job_id} has no captions: send the book with "
                "captions=true.",
                param="n",
            )
        texts.append(data.decode())
    lengths = [item["audio_seconds"] or 0.0 for item in parts]
    name = f"chapter-{number + 1:03d}.{kind}"
    return Response(
        chapters.joined_captions(texts, lengths, kind),
        media_type=CAPTION_TYPES[kind],
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )


def _audio_operation(p: Parts) -> dict[str, object]:
    return {
        "operationId": "getAudiobookChapterAudio",
        "summary": "One chapter of a book as one FLAC file, once its items are done",
        "responses": responses(
            {
                "description": "the chapter",
                "content": {"audio/flac": {"schema": {"type": "string", "format": "binary"}}},
            },
            404,
            409,
        ),
    }


def _captions_operation(kind: str) -> Any:
    return lambda p: {
        "operationId": f"getAudiobookChapterCaptions{kind.title()}",
        "summary": "One chapter's captions, if the book was sent with captions=true",
        "responses": responses(
            {
                "description": "the captions",
                "content": {CAPTION_TYPES[kind]: {"schema": {"type": "string"}}},
            },
            404,
            409,
        ),
    }


# (path, method, handler, OpenAPI operation, body limit): supervisor/http/route_table.py's rows
ROUTES = (
    ("/v1/audiobooks/{job_id}/chapters/{n}/audio", "GET", chapter_audio, _audio_operation, None),
    *(
        (
            f"/v1/audiobooks/{{job_id}}/chapters/{{n}}/captions.{kind}",
            "GET",
            chapter_captions,
            _captions_operation(kind),
            None,
        )
        for kind in CAPTION_TYPES
    ),
)
