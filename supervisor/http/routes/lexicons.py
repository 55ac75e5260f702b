"""`/v1/audio/lexicons`: pronunciation lexicons (supervisor/speech/stores/lexicons.py) listed, read, saved,
deleted: each API key's own (supervisor/speech/stores/access.py); an admin key's, all."""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import JSONResponse

from supervisor.errors import NotFound
from supervisor.http.auth import tenant
from supervisor.http.routes import services
from supervisor.http.routes.speech import read_json
from supervisor.speech.stores.lexicons import parse


async def list_lexicons(request: Request) -> JSONResponse:
    found = services(request).lexicons_for(tenant(request)).list()
    return JSONResponse({"object": "list", "data": [lexicon.public() for lexicon in found]})


async def get_lexicon(request: Request) -> JSONResponse:
    name = request.path_params["name"]
    found = services(request).lexicons_for(tenant(request)).get(name)
    if found is None:
        raise NotFound(f"no lexicon named {name!r}", param="name")
    return JSONResponse(found.public())


async def put_lexicon(request: Request) -> JSONResponse:
    """Save a lexicon, replacing one of that name: 201 if it is new, 200 if it replaced one."""
    lexicons = services(request).lexicons_for(tenant(request))
    lexicon = parse(request.path_params["name"], await read_json(request), lexicons.tenant.owner)
    # written and flushed to disk
    lexicon, replaced = await asyncio.to_thread(lexicons.put, lexicon)
    return JSONResponse(lexicon.public(), status_code=200 if replaced else 201)


async def delete_lexicon(request: Request) -> JSONResponse:
    name = request.path_params["name"]
    lexicons = services(request).lexicons_for(tenant(request))
    if lexicons.get(name) is None:
        raise NotFound(f"no lexicon named {name!r}", param="name")
    await asyncio.to_thread(lexicons.store.delete, name)
    return JSONResponse({"name": name, "object": "audio.lexicon.deleted", "deleted": True})
