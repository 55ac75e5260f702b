"""`/v1/audio/lexicons`: pronunciation lexicons (supervisor/speech/lexicons.py) listed, read, saved,
deleted."""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import JSONResponse

from supervisor.errors import NotFound
from supervisor.http.routes import services
from supervisor.http.routes.speech import read_json
from supervisor.speech.lexicons import parse


async def list_lexicons(request: Request) -> JSONResponse:
    store = services(request).lexicons
    return JSONResponse(
        {"object": "list", "data": [store.lexicons[n].public() for n in sorted(store.lexicons)]}
    )


async def get_lexicon(request: Request) -> JSONResponse:
    name = request.path_params["name"]
    found = services(request).lexicons.get(name)
    if found is None:
        raise NotFound(f"no lexicon named {name!r}", param="name")
    return JSONResponse(found.public())


async def put_lexicon(request: Request) -> JSONResponse:
    """Save a lexicon, replacing one of that name: 201 if it is new, 200 if it replaced one."""
    store = services(request).lexicons
    lexicon = parse(request.path_params["name"], await read_json(request))
    replaced = await asyncio.to_thread(store.put, lexicon)  # written and flushed to disk
    return JSONResponse(lexicon.public(), status_code=200 if replaced else 201)


async def delete_lexicon(request: Request) -> JSONResponse:
    name = request.path_params["name"]
    await asyncio.to_thread(services(request).lexicons.delete, name)
    return JSONResponse({"name": name, "object": "audio.lexicon.deleted", "deleted": True})
