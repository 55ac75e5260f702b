"""A voice form's reference audio: the form read (at most one file), the upload checked by its
size and first bytes, its transcript heard, its clone prompt encoded by a sidecar.

A reference upload is checked here only for its size and its first bytes (WAV, FLAC, MP3 or
OGG; anything else is a 415). It is decoded, resampled, trimmed and encoded into a clone prompt
by a sidecar (`encode_voice` with the file as uploaded), so untrusted audio is only ever parsed
in a process the supervisor can kill and replace. Audio that will not decode, is silent or is
longer than `--max-reference-s` is a 422. With an ASR sidecar (--asr-model) the transcript may be
left out: the clip is transcribed first, by that sidecar (supervisor/supervision/asr.py).
"""

from __future__ import annotations

from starlette.datastructures import UploadFile
from starlette.requests import Request

from sidecar.shared.protocol import VoicePayload
from supervisor.errors import InvalidRequest, PayloadTooLarge, Unprocessable, UnsupportedMedia
from supervisor.http.forms import parse_form
from supervisor.http.routes.speech import until_disconnected
from supervisor.services import Services
from supervisor.speech.request import field_checks, schemas
from supervisor.supervision.asr import transcribe_reference

MAX_FORM_FIELDS = 32
MAX_FIELD_BYTES = 256 * 1024
FILE_FIELDS = frozenset({"file", "audio_sample", "ref_audio"})
AUDIO_KINDS = "WAV, FLAC, MP3 or OGG (Vorbis or Opus)"


class Form:
    """A parsed form: text fields and at most one uploaded file, each key at most once."""

    def __init__(
        self, fields: dict[str, str], file: bytes | None, filename: str | None, file_key: str | None
    ) -> None:
        self.fields = fields
        self.file = file
        self.filename = filename
        self.file_key = file_key


async def read_form(
    request: Request,
    svc: Services,
    allowed: frozenset[str],
    *,
    multipart_only: bool,
    max_part_size: int = MAX_FIELD_BYTES,
) -> Form:
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
    form = await parse_form(
        request,
        multipart=content_type == "multipart/form-data",
        max_files=1,
        max_fields=MAX_FORM_FIELDS,
        max_part_size=max_part_size,
    )
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
        field_checks.refuse_unencodable(fields)
        return Form(fields, file, filename, file_key)
    finally:
        await form.close()


async def read_upload(upload: UploadFile, svc: Services, key: str) -> bytes:
    data = await upload.read(upload_limit(svc) + 1)
    return checked_audio(data, svc, key, "the uploaded audio file", "the uploaded file")


def upload_limit(svc: Services) -> int:
    return int(svc.settings.http.max_upload_mb * 2**20)


def checked_audio(data: bytes, svc: Services, key: str, empty_name: str, file_name: str) -> bytes:
    """An uploaded reference (a file, or base64 text decoded): 413 if too large, 400 if empty,
    415 if it is not audio we read. The names say what was sent, in the error messages."""
    if len(data) > upload_limit(svc):
        raise PayloadTooLarge(
            f"the audio file is larger than {svc.settings.http.max_upload_mb:g} MiB", param=key
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
    hearing = transcribe_reference(svc.asr, upload, svc.settings.speech.asr_timeout_s)
    return await until_disconnected(request, hearing)


async def encode_reference(
    request: Request, svc: Services, form: Form, transcript: str, preprocess: bool
) -> VoicePayload:
    """A clone prompt from an uploaded file, computed by a sidecar."""
    assert form.file is not None
    future = svc.scheduler.submit_encode(
        {
            "audio": form.file,
            "encoding": "file",
            "sample_rate": 0,
            "ref_text": transcript,
            "preprocess": preprocess,
            "max_duration_s": svc.settings.http.max_reference_s,
        }
    )
    try:
        message = await until_disconnected(request, future)
    except InvalidRequest as exc:
        if type(exc) is not InvalidRequest:
            raise
        raise Unprocessable(
            f"the reference audio cannot be used: {exc.message}", param=form.file_key
        ) from None
    return message["voice"]
