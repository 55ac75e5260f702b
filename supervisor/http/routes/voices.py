"""Saved voices (`/v1/audio/voices`): created, listed, read and deleted per API key.

Creating a voice takes OpenAI's form (`client.audio.voices.create`): `type: audio_sample` with
the clip as `audio_sample` (or `file`) and, ours, its `transcript`; or `type: prompt` with a
voice-design `prompt`, saved with a seed of its own so it keeps sounding the same. A saved
voice's prompt is computed once, by a sidecar, and stored; how the reference audio is read and
checked is in supervisor/http/routes/reference.py, the one-shot forms in `one_shot.py`.
"""

from __future__ import annotations

import secrets
import time

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from supervisor.errors import InvalidRequest, NotFound
from supervisor.http.auth import tenant
from supervisor.http.routes import services
from supervisor.http.routes.reference import (
    encode_reference,
    hear_reference,
    preprocess_flag,
    read_form,
)
from supervisor.http.routes.speech import CLIENT_CLOSED, ClientGone
from supervisor.speech.request import field_checks, schemas
from supervisor.speech.stores.access import VoiceAccess
from supervisor.speech.stores.voices import SavedVoice, VoiceObject, VoiceSource

VOICE_FIELDS = frozenset(
    {
        "name",
        "type",
        "file",
        "audio_sample",
        "transcript",
        "preprocess",
        "consent",
        "prompt",
        "model",
        "script_hint",
    }
)


def builtin_voices() -> list[VoiceObject]:
    """'auto' (the model picks a voice) and OpenAI's names, each a designed voice."""
    entries: list[VoiceObject] = [
        {
            "id": "auto",
            "object": "audio.voice",
            "name": "auto",
            "type": "prompt",
            "created_at": 0,
            "prompt": None,
            "builtin": True,
        }
    ]
    for name, instruct in schemas.OPENAI_VOICES.items():
        entries.append(
            {
                "id": name,
                "object": "audio.voice",
                "name": name,
                "type": "prompt",
                "created_at": 0,
                "prompt": instruct,
                "builtin": True,
            }
        )
    return entries


async def create_voice(request: Request) -> Response:
    svc = services(request)
    form = await read_form(
        request, svc, VOICE_FIELDS, multipart_only=False
    )  # a prompt voice has no file
    fields = form.fields
    name = schemas.voice_name(fields.get("name"))
    kind = fields.get("type") or (
        "prompt" if "prompt" in fields and form.file is None else "audio_sample"
    )
    if kind not in ("audio_sample", "prompt"):
        raise InvalidRequest(f"'type' must be audio_sample or prompt; got {kind!r}.", param="type")
    if kind == "prompt":
        misplaced = sorted(set(fields) & {"transcript", "preprocess", "consent"}) + (
            [form.file_key] if form.file_key else []
        )
    else:
        misplaced = sorted(set(fields) & {"prompt", "model", "script_hint"})
    if misplaced:
        raise InvalidRequest(
            f"A voice of type {kind!r} takes no {', '.join(map(repr, misplaced))}.",
            param=misplaced[0],
        )
    owner = tenant(request)
    # before any sidecar work; add() checks again, atomically
    svc.voices_for(owner).check_new(name)
    created = int(time.time())
    if kind == "prompt":
        prompt = schemas.instructions(
            field_checks.string(fields, "prompt", max_chars=svc.settings.http.max_input_chars),
            "",
            "prompt",
        )
        if prompt is None:
            raise InvalidRequest(
                "Missing required field: 'prompt' (voice-design items such as 'male, low pitch').",
                param="prompt",
            )
        saved = svc.voices.add(
            SavedVoice(
                name, created, "prompt", prompt=prompt, seed=secrets.randbits(63), owner=owner.owner
            )
        )
        return JSONResponse(made(saved), status_code=201)
    transcript = schemas.transcript(fields.get("transcript"), svc.settings.speech, svc.asr is None)
    if form.file is None:
        raise InvalidRequest(
            "Missing required field: 'audio_sample' (the reference audio; 'file' works too).",
            param="audio_sample",
        )
    try:
        transcript = transcript or await hear_reference(request, svc, form.file)
        voice = await encode_reference(request, svc, form, transcript, preprocess_flag(form))
    except ClientGone:
        return Response(status_code=CLIENT_CLOSED)
    source: VoiceSource = {
        "filename": form.filename,
        "bytes": len(form.file),
        "consent": fields.get("consent"),
    }
    saved = svc.voices.add(
        SavedVoice(
            name,
            created,
            "audio_sample",
            transcript=transcript,
            voice=voice,
            source=source,
            owner=owner.owner,
        )
    )
    return JSONResponse(made(saved), status_code=201)


def made(saved: SavedVoice) -> VoiceObject:
    """A voice just saved, as GET will read it to its maker: its maker may delete it (only an
    admin key makes a shared voice, and an admin key deletes any)."""
    return {**saved.public(), "deletable": True}


def shown(saved: SavedVoice, access: VoiceAccess) -> VoiceObject:
    """A saved voice as the asking key reads it: with whether it may delete it (a shared voice
    only an admin key may), so a client offers Delete only where it works."""
    return {**saved.public(), "deletable": access.may_manage(saved)}


async def list_voices(request: Request) -> JSONResponse:
    access = services(request).voices_for(tenant(request))
    saved = [shown(voice, access) for voice in access.list()]
    return JSONResponse({"object": "list", "data": builtin_voices() + saved})


async def get_voice(request: Request) -> JSONResponse:
    svc = services(request)
    name = request.path_params["name"]
    access = svc.voices_for(tenant(request))
    saved = access.get(name)
    if saved is not None:
        return JSONResponse(shown(saved, access))
    builtin = next((v for v in builtin_voices() if v["id"] == name.lower()), None)
    if builtin is None:
        raise NotFound(f"no voice named {name!r}", param="name")
    return JSONResponse(builtin)


async def delete_voice(request: Request) -> JSONResponse:
    svc = services(request)
    name = request.path_params["name"]
    if name.lower() in schemas.RESERVED_VOICES:
        raise InvalidRequest(
            f"{name!r} is a built-in voice; only saved voices can be deleted", param="name"
        )
    voices = svc.voices_for(tenant(request))
    saved = voices.get(name)
    if saved is not None:
        voices.check_manage(saved)
    if saved is None or not svc.voices.delete(name):
        raise NotFound(f"no voice named {name!r}", param="name")
    return JSONResponse({"id": name, "object": "audio.voice.deleted", "deleted": True})
