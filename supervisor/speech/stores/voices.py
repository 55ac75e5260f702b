"""Saved voices on disk: one msgpack file per voice, written atomically, read once at start.

    <data dir>/voices/<name>.voice   {format, name, created_at, type, transcript, voice, prompt, seed, source, owner}

A voice is one of OpenAI's two kinds. `audio_sample`: `voice` is the clone prompt exactly as a
sidecar's `encoded` frame carried it (codec tokens, transcript as preprocessed, loudness), so
using it costs no sidecar work. `prompt`: a designed voice, its voice-design `prompt` and the
seed drawn when it was saved, so that it sounds the same in every request. A file is
written to a temporary name, flushed to disk, then hard-linked to its final name, which fails
if the name is taken (two uploads racing for one name: the second gets 409), and the directory
is flushed too. A crash at any point leaves either no voice or a whole one. Files that do not
read back as a voice are logged and skipped, never served. A voice is its API key's (`owner`;
one saved before owners existed is the default owner's): speech.stores.access says who may use it.

`resolve_voice` turns a request's `voice` (and `instructions`) into what a synthesis runs with;
the speech route and job items share it.
"""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import logging
import os
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal, Protocol, TypedDict

import msgpack

from sidecar.shared.duration import FRAME_RATE
from sidecar.shared.protocol import FROM_SIDECAR, ProtocolError, VoicePayload, validate
from supervisor import metrics
from supervisor.errors import Conflict, InvalidRequest
from supervisor.speech.request import schemas
from supervisor.speech.request.schemas import SpeechRequest
from supervisor.speech.request.voice import Voice, VoiceResolver
from supervisor.storage_errors import storage_error
from supervisor.tenants import DEFAULT_OWNER, OWNER_NAME

log = logging.getLogger("omnivoice.voices")

SUFFIX = ".voice"
FORMAT = 1


class _VoiceObjectBase(TypedDict):
    id: str
    object: Literal["audio.voice"]
    name: str
    type: str  # "audio_sample" (a clone prompt) or "prompt" (a designed voice)
    created_at: int


class VoiceObject(_VoiceObjectBase, total=False):
    """A voice as the API shows it."""

    prompt: str | None  # prompt: the voice-design instruct (None: the model picks)
    transcript: str | None  # audio_sample: what the reference says
    duration_s: float | None  # audio_sample: the clone prompt's length
    builtin: bool  # one of the server's own ('auto' and OpenAI's names)
    deletable: bool  # a saved voice, listed or read: whether the asking key may delete it


class VoiceSource(TypedDict, total=False):
    """A cloned voice's upload, kept with it (a designed voice has none)."""

    filename: str | None
    bytes: int  # its size
    consent: str | None  # the form's `consent` field, as sent


@dataclass(frozen=True)
class SavedVoice:
    name: str
    created_at: int
    type: str  # "audio_sample" (a clone prompt) or "prompt" (a designed voice)
    transcript: str | None = None  # audio_sample: what the reference says
    voice: VoicePayload | None = None  # audio_sample: the clone prompt
    prompt: str | None = None  # prompt: the voice-design instruct
    seed: int | None = None  # prompt: fixed, so the voice stays the same
    source: VoiceSource = field(default_factory=VoiceSource)  # the upload
    owner: str = DEFAULT_OWNER  # supervisor.tenants

    @property
    def duration_s(self) -> float | None:
        """Length of a clone prompt (after silence trimming), from its codec frames."""
        return round(self.voice["tokens"]["shape"][1] / FRAME_RATE, 2) if self.voice else None

    def public(self) -> VoiceObject:
        entry: VoiceObject = {
            "id": self.name,
            "object": "audio.voice",
            "name": self.name,
            "type": self.type,
            "created_at": self.created_at,
        }
        if self.type == "prompt":
            entry["prompt"] = self.prompt
        else:
            entry["transcript"], entry["duration_s"] = self.transcript, self.duration_s
        return entry

    def to_file(self) -> bytes:
        return msgpack.packb(
            {
                "format": FORMAT,
                "name": self.name,
                "created_at": self.created_at,
                "type": self.type,
                "transcript": self.transcript,
                "voice": self.voice,
                "prompt": self.prompt,
                "seed": self.seed,
                "source": self.source,
                "owner": self.owner,
            },
            use_bin_type=True,
        )

    @classmethod
    def from_file(cls, data: bytes) -> SavedVoice:
        """Parse and check a voice file; ValueError when it is not one."""
        try:
            obj = msgpack.unpackb(data, raw=False, strict_map_key=True)
            if not isinstance(obj, dict) or obj.get("format") != FORMAT:
                raise ValueError(f"not a format-{FORMAT} voice file")
            source: VoiceSource = (
                obj.get("source") or {}
            )  # fresh from the file: nothing else holds it
            voice = cls(
                obj["name"],
                obj["created_at"],
                obj["type"],
                obj.get("transcript"),
                obj.get("voice"),
                obj.get("prompt"),
                obj.get("seed"),
                source,
                obj.get("owner", DEFAULT_OWNER),
            )
            voice.check()
            return voice
        except (
            ProtocolError,
            KeyError,
            TypeError,
            ValueError,
            msgpack.ExtraData,
            msgpack.FormatError,
            msgpack.StackError,
        ) as exc:
            raise ValueError(str(exc)) from None

    def check(self) -> None:
        """ValueError (or ProtocolError) unless every field has the type its kind needs."""
        if not (isinstance(self.name, str) and isinstance(self.created_at, int)):
            raise ValueError("name or created_at of the wrong type")
        if not isinstance(self.owner, str) or not OWNER_NAME.fullmatch(self.owner):
            raise ValueError("an owner that is not an owner's name")
        if self.type == "audio_sample":
            if not isinstance(self.transcript, str):
                raise ValueError("an audio_sample voice without a transcript")
            validate({"op": "encoded", "batch": 0, "id": "file", "voice": self.voice}, FROM_SIDECAR)
        elif self.type == "prompt":
            if (
                not isinstance(self.prompt, str)
                or not isinstance(self.seed, int)
                or isinstance(self.seed, bool)
            ):
                raise ValueError("a prompt voice without its prompt or seed")
        else:
            raise ValueError(f"unknown voice type {self.type!r}")


class Voices(Protocol):
    """Saved voices as the routes use them: files here (VoiceStore), or PostgreSQL (speech.stores.pg_voices)."""

    def get(self, name: str) -> SavedVoice | None: ...
    def list(self) -> builtins.list[SavedVoice]: ...
    def check_free(self, name: str) -> None: ...
    def add(self, saved: SavedVoice) -> SavedVoice: ...
    def delete(self, name: str) -> bool: ...
    def close(self) -> None: ...


class VoiceStore:
    """The saved voices of one data directory, kept in memory and on disk."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.voices: dict[str, SavedVoice] = {}
        self.load()

    def load(self) -> None:
        if not self.directory.is_dir():
            return
        for path in sorted(self.directory.glob(f"*{SUFFIX}")):
            try:
                voice = SavedVoice.from_file(path.read_bytes())
            except (OSError, ValueError) as exc:
                log.warning("skipping %s: not a readable voice file (%s)", path, exc)
                continue
            if path.name != voice.name + SUFFIX:
                log.warning("skipping %s: it holds the voice %r", path, voice.name)
                continue
            self.voices[voice.name] = voice
        log.info("%d saved voice(s) in %s", len(self.voices), self.directory)

    def get(self, name: str) -> SavedVoice | None:
        return self.voices.get(name)

    def close(self) -> None:
        """Nothing held open: every change is written when it is made."""

    def list(self) -> list[SavedVoice]:
        return sorted(self.voices.values(), key=lambda v: (v.created_at, v.name))

    def path(self, name: str) -> Path:
        return self.directory / f"{name}{SUFFIX}"

    def check_free(self, name: str) -> None:
        if name in self.voices:
            raise Conflict(
                f"a voice named {name!r} exists already; delete it first to replace it",
                param="name",
            )

    def add(self, saved: SavedVoice) -> SavedVoice:
        """Write a new voice; Conflict if the name is taken (also by a concurrent upload)."""
        name = saved.name
        self.check_free(name)
        saved.check()
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._write_new(self.path(name), saved.to_file())
        except FileExistsError:
            raise Conflict(
                f"a voice named {name!r} exists already; delete it first to replace it",
                param="name",
            ) from None
        except OSError as exc:
            log.error("cannot save voice %r in %s: %s", name, self.directory, exc)
            raise storage_error(exc, "the voice could not be saved") from None
        self.voices[name] = saved
        log.info("saved voice %r (%s)", name, saved.type)
        return saved

    def delete(self, name: str) -> bool:
        if name not in self.voices:
            return False
        try:
            os.unlink(self.path(name))
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise storage_error(exc, "the voice could not be deleted") from None
        self._sync_directory()
        del self.voices[name]
        log.info("deleted voice %r", name)
        return True

    def _write_new(self, final: Path, data: bytes) -> None:
        temporary = final.with_name(f".{final.name}.{uuid.uuid4().hex}.tmp")
        try:
            with open(temporary, "xb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            try:
                os.link(temporary, final)  # atomic, and never replaces an existing file
            except FileExistsError:
                raise
            except OSError:  # a file system without hard links
                if final.exists():
                    raise FileExistsError(final) from None
                os.replace(temporary, final)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
        self._sync_directory()

    def _sync_directory(self) -> None:
        with contextlib.suppress(OSError):
            fd = os.open(self.directory, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


class PromptCache:
    """One-shot clone prompts, by a digest of the reference's samples, its transcript and the
    owner (the API key's tenant) that cloned it, so that no key learns, by a hit, that another
    key cloned a clip; least recently used out. Lookups count as hits or misses in /metrics."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.prompts: OrderedDict[str, VoicePayload] = OrderedDict()

    @staticmethod
    def key(audio: bytes, transcript: str, preprocess: bool, owner: str) -> str:
        digest = hashlib.sha256(samples(audio))
        digest.update(b"\0" + transcript.encode() + b"\0" + bytes([preprocess]))
        digest.update(b"\0" + owner.encode("utf-8", "surrogatepass"))
        return digest.hexdigest()

    def get(self, key: str) -> VoicePayload | None:
        prompt = self.prompts.get(key)
        if prompt is not None:
            self.prompts.move_to_end(key)
        (metrics.clone_cache_hits if prompt is not None else metrics.clone_cache_misses).inc()
        return prompt

    def put(self, key: str, prompt: VoicePayload) -> None:
        if self.size <= 0:
            return
        self.prompts[key] = prompt
        self.prompts.move_to_end(key)
        while len(self.prompts) > self.size:
            self.prompts.popitem(last=False)
        metrics.clone_cache_entries.set(len(self.prompts))


def samples(audio: bytes) -> bytes:
    """What identifies a reference's audio for the cache: a WAV's format and sample data, so the
    same samples with other metadata (tags, chunk order) are the same reference; any other
    container as uploaded (it is decoded only in a sidecar, never here). Only the RIFF chunk
    headers are read, each bounded by the upload; anything unexpected falls back to all bytes."""
    if audio[:4] != b"RIFF" or audio[8:12] != b"WAVE":
        return audio
    found: dict[bytes, bytes] = {}
    at = 12
    while at + 8 <= len(audio) and len(found) < 2:
        chunk, size = audio[at : at + 4], int.from_bytes(audio[at + 4 : at + 8], "little")
        if chunk in (b"fmt ", b"data"):
            found.setdefault(chunk, audio[at + 8 : at + 8 + size])
        at += 8 + size + (size & 1)
    if len(found) < 2:
        return audio
    return b"fmt " + found[b"fmt "] + b"data" + found[b"data"]


class VoiceLookup(Protocol):
    """What resolving a voice needs: a saved voice by name (speech.stores.access.VoiceAccess: those
    the request's API key may use)."""

    def get(self, name: str) -> SavedVoice | None: ...


def resolve_voice(request: SpeechRequest, store: VoiceLookup) -> Voice:
    """'auto', an OpenAI voice (a designed voice), or a saved voice; 400 for anything else.
    OmniVoice-Studio's 'default' is 'auto', unless a saved voice has that name."""
    name = request.voice
    if name == "default" and store.get(name) is None:
        name = "auto"
    if name == "auto":
        return Voice(instruct=request.instructions)
    if name in schemas.OPENAI_VOICES:
        return Voice(
            instruct=request.instructions or schemas.OPENAI_VOICES[name],
            seed=schemas.default_seed(name),
        )
    saved = store.get(name)
    if saved is None:
        error = InvalidRequest(
            f"Voice {name!r} not found: use 'auto', an OpenAI voice name ({', '.join(schemas.OPENAI_VOICES)}) "
            "or a saved voice (GET /v1/audio/voices lists them); to design a voice, send 'instructions' or 'design:<items>'.",
            param="voice",
        )
        error.code = "voice_not_found"
        raise error
    if saved.type == "prompt":
        return Voice(instruct=request.instructions or saved.prompt, seed=saved.seed)
    return Voice(instruct=request.instructions, prompt=saved.voice)


def voice_resolver(request: SpeechRequest, store: VoiceLookup) -> VoiceResolver:
    """Voices named inside a request's text (SSML <voice>, dialogue turns), resolved as its own
    voice is but without its instructions; an unknown one is a 400 on 'input'."""

    def resolve(name: str) -> Voice:
        try:
            return resolve_voice(
                replace(request, voice=schemas.voice(name), instructions=None), store
            )
        except InvalidRequest as exc:
            exc.param = "input"
            raise

    return resolve
