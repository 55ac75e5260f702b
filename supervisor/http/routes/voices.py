"""Saved voices (`/v1/audio/voices`), and the one-shot clone and design forms.

Creating a voice takes OpenAI's form (`client.audio.voices.create`): `type: audio_sample` with
the clip as `audio_sample` (or `file`) and, ours, its `transcript`; or `type: prompt` with a
voice-design `prompt`, saved with a seed of its own so it keeps sounding the same. A reference upload is checked here only for its size and its first bytes (WAV, FLAC, MP3 or
OGG; anything else is a 415). It is decoded, resampled, trimmed and encoded into a clone prompt
by a sidecar (`encode_voice` with the file as uploaded), so untrusted audio is only ever parsed
in a process the supervisor can kill and replace. Audio that will not decode, is silent or is
longer than `--max-reference-s` is a 422. A saved voice's prompt is computed once and stored;
a one-shot clone's is kept in an in-memory cache, so sending the same reference again costs
no sidecar work. With an ASR sidecar (--asr-model) the transcript may be left out: the clip is
transcribed first, by that sidecar (supervisor/supervision/asr.py), and what it heard is used.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import secrets
import time
from typing import Any

from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from sidecar.shared.protocol import VoicePayload
from supervisor.errors import (
    InvalidRequest,
    NotFound,
    PayloadTooLarge,
    Unprocessable,
    UnsupportedMedia,
)
from supervisor.http.auth import tenant
from supervisor.http.forms import parse_form
from supervisor.http.routes import services
from supervisor.http.routes.speech import (
    CLIENT_CLOSED,
    ClientGone,
    read_json,
    respond,
    until_disconnected,
)
from supervisor.services import Services
from supervisor.speech import schemas
from supervisor.speech.synthesis import Voice
from supervisor.speech.voices import PromptCache, SavedVoice
from supervisor.supervision.asr import transcribe_reference

MAX_FORM_FIELDS = 32
MAX_FIELD_BYTES = 256 * 1024
FILE_FIELDS = frozenset({"file", "audio_sample", "ref_audio"})
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
CLONE_FIELDS = schemas.OPTION_FIELDS | {"file", "transcript", "preprocess"}
DESIGN_FIELDS = schemas.OPTION_FIELDS
AUDIO_KINDS = "WAV, FLAC, MP3 or OGG (Vorbis or Opus)"
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
    | schemas.aliases_for(schemas.OPTION_FIELDS)
    | set(FORM_ALIASES)
    | {"ref_audio", BASE64_FIELD}
)
DESIGN_ALIASES = {"text": "input", "language_id": "language"}
DESIGN_FORM: frozenset[str] = (
    DESIGN_FIELDS | schemas.aliases_for(DESIGN_FIELDS) | set(DESIGN_ALIASES)
)


class Form:
    """A parsed form: text fields and at most one uploaded file, each key at most once."""

    def __init__(
        self, fields: dict[str, str], file: bytes | None, filename: str | None, file_key: str | None
    ) -> None:
        self.fields = fields
        self.file = file
        self.filename = filename
        self.file_key = file_key


async def read_form(request: Request, svc: Services, allowed: frozenset[str], *, multipart_only: bool,
                    max_part_size: int = MAX_FIELD_BYTES) -> Form:  # fmt: skip
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    kinds = (
        ("multipart/form-data",)
        if multipart_only
        else ("multipart/form-data", "application/x-www-form-urlencoded")
    )
    if content_type not in kinds:
        raise UnsupportedMedia(
            f"this route takes a form ({' or '.join(kinds)}), not {content_type or 'a body without a Content-Type'}"
        )
    form = await parse_form(request, multipart=content_type == "multipart/form-data", max_files=1,
                            max_fields=MAX_FORM_FIELDS, max_part_size=max_part_size)  # fmt: skip
    try:
        fields: dict[str, str] = {}
        file: bytes | None = None
        filename: str | None = None
        file_key: str | None = None
        for key, value in form.multi_items():
            if key not in allowed:
                raise InvalidRequest(
                    f"Unrecognized form field {key!r}. Accepted: {', '.join(sorted(allowed))}.",
                    param=key,
                )
            if key in fields or (key in FILE_FIELDS and file is not None):
                raise InvalidRequest(
                    f"Form field {key!r} is given more than once (one audio file at most).",
                    param=key,
                )
            if key in FILE_FIELDS:
                if not isinstance(value, UploadFile):
                    raise InvalidRequest(
                        f"{key!r} must be an uploaded file, not a text field.", param=key
                    )
                file, filename, file_key = await read_upload(value, svc, key), value.filename, key
            elif isinstance(value, UploadFile):
                raise InvalidRequest(f"{key!r} must be a text field, not a file.", param=key)
            else:
                fields[key] = value
        schemas.refuse_unencodable(fields)
        return Form(fields, file, filename, file_key)
    finally:
        await form.close()


async def read_upload(upload: UploadFile, svc: Services, key: str) -> bytes:
    data = await upload.read(upload_limit(svc) + 1)
    return checked_audio(data, svc, key, "the uploaded audio file", "the uploaded file")


def upload_limit(svc: Services) -> int:
    return int(svc.settings.max_upload_mb * 2**20)


def checked_audio(data: bytes, svc: Services, key: str, empty_name: str, file_name: str) -> bytes:
    """An uploaded reference (a file, or base64 text decoded): 413 if too large, 400 if empty,
    415 if it is not audio we read. The names say what was sent, in the error messages."""
    if len(data) > upload_limit(svc):
        raise PayloadTooLarge(
            f"the audio file is larger than {svc.settings.max_upload_mb:g} MiB", param=key
        )
    if not data:
        raise InvalidRequest(f"{empty_name} is empty", param=key)
    if sniff(data) is None:
        raise UnsupportedMedia(f"{file_name} is not audio we read: send {AUDIO_KINDS}", param=key)
    return data


def sniff(data: bytes) -> str | None:
    """The container an upload's first bytes announce, or None."""
    if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        return "wav"
    if data[:4] == b"fLaC":
        return "flac"
    if data[:4] == b"OggS":
        return "ogg"
    # An ID3 tag, or an MPEG audio frame sync with a layer (ADTS AAC has layer 0: not ours).
    if data[:3] == b"ID3" or (
        len(data) > 1 and data[0] == 0xFF and data[1] & 0xE0 == 0xE0 and data[1] & 0x06
    ):
        return "mp3"
    return None


def preprocess_flag(form: Form) -> bool:
    value = schemas.from_form({"preprocess": form.fields.get("preprocess", "")}).get("preprocess")
    return True if value is None else bool(value)


async def hear_reference(request: Request, svc: Services, upload: bytes) -> str:
    """The transcript of a reference sent without one, by the ASR sidecar (--asr-model)."""
    assert svc.asr is not None
    hearing = transcribe_reference(svc.asr, upload, svc.settings.asr_timeout_s)
    return await until_disconnected(request, hearing)


async def encode_reference(
    request: Request, svc: Services, form: Form, transcript: str, preprocess: bool
) -> VoicePayload:
    """A clone prompt from an uploaded file, computed by a sidecar."""
    assert form.file is not None
    future = svc.scheduler.submit_encode({
        "audio": form.file, "encoding": "file", "sample_rate": 0, "ref_text": transcript, "preprocess": preprocess,
        "max_duration_s": svc.settings.max_reference_s,
    })  # fmt: skip
    try:
        message = await until_disconnected(request, future)
    except InvalidRequest as exc:
        if type(exc) is not InvalidRequest:
            raise
        raise Unprocessable(
            f"the reference audio cannot be used: {exc.message}", param=form.file_key
        ) from None
    prompt: VoicePayload = message["voice"]
    return prompt


# ---------------------------------------------------------------- saved voices


def builtin_voices() -> list[dict[str, Any]]:
    """'auto' (the model picks a voice) and OpenAI's names, each a designed voice."""
    entries: list[dict[str, Any]] = [
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
            schemas.string(fields, "prompt", max_chars=svc.settings.max_input_chars), "", "prompt"
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
        return JSONResponse(saved.public(), status_code=201)
    transcript = schemas.transcript(fields.get("transcript"), svc.settings, svc.asr is None)
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
    source = {"filename": form.filename, "bytes": len(form.file), "consent": fields.get("consent")}
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
    return JSONResponse(saved.public(), status_code=201)


async def list_voices(request: Request) -> JSONResponse:
    saved = services(request).voices_for(tenant(request)).list()
    return JSONResponse({"object": "list", "data": builtin_voices() + [v.public() for v in saved]})


async def get_voice(request: Request) -> JSONResponse:
    svc = services(request)
    name = request.path_params["name"]
    saved = svc.voices_for(tenant(request)).get(name)
    if saved is not None:
        return JSONResponse(saved.public())
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


# ---------------------------------------------------------------- one-shot forms


def fold_form_aliases(
    fields: dict[str, Any], aliases: dict[str, str] = FORM_ALIASES
) -> dict[str, Any]:
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
    transcript = schemas.transcript(fields.get("transcript"), svc.settings, svc.asr is None)
    body = schemas.from_form(
        {k: v for k, v in fields.items() if k not in ("transcript", "preprocess")}
    )
    speech = schemas.speech_request(body, svc.settings, allowed=schemas.OPTION_FIELDS)
    if form.file is None:
        raise InvalidRequest("Missing required field: 'file' (the reference audio).", param="file")
    form.fields = fields
    preprocess = preprocess_flag(form)
    cache: PromptCache = svc.clones
    # Walks the RIFF chunks and hashes the samples: off the event loop.
    key = await asyncio.to_thread(cache.key, form.file, transcript, preprocess)
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
        body, svc.settings, allowed=DESIGN_FIELDS, strict_instructions=True
    )
    if speech.instructions is None:
        raise InvalidRequest(
            "Missing required field: 'instructions' (the voice to design, e.g. 'female, british accent').",
            param="instructions",
        )
    return await respond(request, svc, speech, Voice(instruct=speech.instructions))
