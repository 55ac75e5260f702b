"""The one-shot forms: speech in the voice of an uploaded reference (`/v1/audio/clone`), or in
a voice described by `instructions` (`/v1/audio/design`), without saving the voice.

A one-shot clone's prompt is kept in an in-memory cache, so sending the same reference again
costs no sidecar work. omnivoice-triton-server's form names are taken too (`FORM_ALIASES`), and
its reference sent as base64 text (`ref_audio_base64`).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from typing import TypeVar

from starlette.requests import Request
from starlette.responses import Response

from supervisor.errors import InvalidRequest, UnsupportedMedia
from supervisor.http.auth import tenant
from supervisor.http.routes import services
from supervisor.http.routes.reference import (
    MAX_FIELD_BYTES,
    Form,
    checked_audio,
    encode_reference,
    hear_reference,
    preprocess_flag,
    read_form,
    upload_limit,
)
from supervisor.http.routes.speech import CLIENT_CLOSED, ClientGone, read_json, respond
from supervisor.services import Services
from supervisor.speech.request import aliases, schemas
from supervisor.speech.request.voice import Voice
from supervisor.speech.stores.voices import PromptCache

CLONE_FIELDS = schemas.OPTION_FIELDS | {"file", "transcript", "preprocess"}
DESIGN_FIELDS = schemas.OPTION_FIELDS
# omnivoice-triton-server's form fields for the clone and design routes: name -> ours. The upload
# `ref_audio` is `file`; `ref_audio_base64` (base64 or a data: URL) is `file` sent as text.
FORM_ALIASES = {
    "text": "input",
    "ref_text": "transcript",
    "language_id": "language",
    "preprocess_prompt": "preprocess",
}
BASE64_FIELD = "ref_audio_base64"
CLONE_FORM: frozenset[str] = (
    CLONE_FIELDS
    | aliases.aliases_for(schemas.OPTION_FIELDS)
    | set(FORM_ALIASES)
    | {"ref_audio", BASE64_FIELD}
)
DESIGN_ALIASES = {"text": "input", "language_id": "language"}

V = TypeVar("V")  # a field's value: a form's str, a JSON body's anything
DESIGN_FORM: frozenset[str] = (
    DESIGN_FIELDS | aliases.aliases_for(DESIGN_FIELDS) | set(DESIGN_ALIASES)
)


def fold_form_aliases(fields: dict[str, V], aliases: dict[str, str] = FORM_ALIASES) -> dict[str, V]:
    """omnivoice-triton-server's form names as ours; the same field under both names must agree
    (but `language` wins over `language_id`, as it does there)."""
    out = dict(fields)
    for alias, ours in aliases.items():
        if alias not in out:
            continue
        value = out.pop(alias)
        if ours in out and out[ours] != value and alias != "language_id":
            raise InvalidRequest(
                f"'{alias}' and '{ours}' are both given and differ; they are the same field: send one.",
                param=alias,
            )
        out.setdefault(ours, value)
    return out


def base64_reference(form: Form, svc: Services) -> None:
    """A reference sent as `ref_audio_base64` text becomes the form's file, checked as an upload is."""
    text = form.fields.pop(BASE64_FIELD, None)
    if text is None:
        return
    if form.file is not None:
        raise InvalidRequest(
            f"Send the reference audio once: as a file or as '{BASE64_FIELD}', not both.",
            param=BASE64_FIELD,
        )
    payload = text.split(",", 1)[1] if text.startswith("data:") and "," in text else text
    try:
        data = base64.b64decode("".join(payload.split()), validate=True)
    except (binascii.Error, ValueError):
        raise InvalidRequest(
            f"'{BASE64_FIELD}' is not valid base64 (nor a data: URL).", param=BASE64_FIELD
        ) from None
    checked_audio(
        data,
        svc,
        BASE64_FIELD,
        f"the reference audio in '{BASE64_FIELD}'",
        f"the reference in '{BASE64_FIELD}'",
    )
    form.file, form.filename, form.file_key = data, None, BASE64_FIELD


async def clone(request: Request) -> Response:
    """Speech in the voice of an uploaded reference, without saving it."""
    svc = services(request)
    # A base64 reference is a text part: let it be as large as the upload it stands for.
    base64_part = (upload_limit(svc) + 2) // 3 * 4 + 1024
    form = await read_form(
        request,
        svc,
        CLONE_FORM,
        multipart_only=False,
        max_part_size=max(MAX_FIELD_BYTES, base64_part),
    )
    if BASE64_FIELD not in form.fields and not request.headers.get(
        "content-type", ""
    ).lower().startswith("multipart/form-data"):
        raise UnsupportedMedia(
            f"this route takes multipart/form-data with the reference as a file (or, in any form, as '{BASE64_FIELD}')"
        )
    # Decoding megabytes of base64 must not stall the event loop.
    await asyncio.to_thread(base64_reference, form, svc)
    fields = fold_form_aliases(form.fields)
    transcript = schemas.transcript(fields.get("transcript"), svc.settings.speech, svc.asr is None)
    body = schemas.from_form(
        {k: v for k, v in fields.items() if k not in ("transcript", "preprocess")}
    )
    speech = schemas.speech_request(body, svc.settings.speech, allowed=schemas.OPTION_FIELDS)
    if form.file is None:
        raise InvalidRequest("Missing required field: 'file' (the reference audio).", param="file")
    form.fields = fields
    preprocess = preprocess_flag(form)
    cache: PromptCache = svc.clones
    # Walks the RIFF chunks and hashes the samples: off the event loop.
    owner = tenant(request).owner  # each key its own cache: a hit says nothing of another key
    key = await asyncio.to_thread(cache.key, form.file, transcript, preprocess, owner)
    prompt = cache.get(key)
    if prompt is None:
        try:
            transcript = transcript or await hear_reference(request, svc, form.file)
            prompt = await encode_reference(request, svc, form, transcript, preprocess)
        except ClientGone:
            return Response(status_code=CLIENT_CLOSED)
        cache.put(key, prompt)
    return await respond(request, svc, speech, Voice(instruct=speech.instructions, prompt=prompt))


async def design(request: Request) -> Response:
    """Speech in a voice described by `instructions` (a form, or a JSON body)."""
    svc = services(request)
    if request.headers.get("content-type", "").split(";")[0].strip().lower() == "application/json":
        body = await read_json(request)
        if isinstance(body, dict):
            body = fold_form_aliases(body, DESIGN_ALIASES)
    else:
        form = await read_form(request, svc, DESIGN_FORM, multipart_only=False)
        body = schemas.from_form(fold_form_aliases(form.fields, DESIGN_ALIASES))
    # Designing a voice is the point here: text naming no valid item is a 400 listing them.
    speech = schemas.speech_request(
        body, svc.settings.speech, allowed=DESIGN_FIELDS, strict_instructions=True
    )
    if speech.instructions is None:
        raise InvalidRequest(
            "Missing required field: 'instructions' (the voice to design, e.g. 'female, british accent').",
            param="instructions",
        )
    return await respond(request, svc, speech, Voice(instruct=speech.instructions))
