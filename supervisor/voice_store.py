"""Saved voices on disk: one msgpack file per voice, written atomically, read once at start.

    <data dir>/voices/<name>.voice   {format, name, created_at, transcript, duration_s, source, voice}

`voice` is the clone prompt exactly as a sidecar's `encoded` frame carried it (codec tokens,
transcript as preprocessed, loudness), so using a saved voice costs no sidecar work. A file is
written to a temporary name, flushed to disk, then hard-linked to its final name, which fails
if the name is taken (two uploads racing for one name: the second gets 409), and the directory
is flushed too. A crash at any point leaves either no voice or a whole one. Files that do not
read back as a voice are logged and skipped, never served.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack

from sidecar.duration import FRAME_RATE
from sidecar.protocol import FROM_SIDECAR, ProtocolError, VoicePayload, validate
from supervisor.errors import Conflict, ServerError

log = logging.getLogger("omnivoice.voices")

SUFFIX = ".voice"
FORMAT = 1


@dataclass(frozen=True)
class SavedVoice:
    name: str
    created_at: int
    transcript: str
    voice: VoicePayload
    source: dict[str, Any] = field(default_factory=dict)  # the upload: filename, bytes

    @property
    def duration_s(self) -> float:
        """Length of the prompt (after silence trimming), from its codec frames."""
        return round(self.voice["tokens"]["shape"][1] / FRAME_RATE, 2)

    def public(self) -> dict[str, Any]:
        return {
            "id": self.name,
            "object": "audio.voice",
            "name": self.name,
            "type": "saved",
            "created_at": self.created_at,
            "transcript": self.transcript,
            "duration_s": self.duration_s,
        }

    def to_file(self) -> bytes:
        return msgpack.packb(
            {"format": FORMAT, "name": self.name, "created_at": self.created_at, "transcript": self.transcript,
             "source": self.source, "voice": self.voice},
            use_bin_type=True,
        )  # fmt: skip

    @classmethod
    def from_file(cls, data: bytes) -> SavedVoice:
        """Parse and check a voice file; ValueError when it is not one."""
        try:
            obj = msgpack.unpackb(data, raw=False, strict_map_key=True)
            if not isinstance(obj, dict) or obj.get("format") != FORMAT:
                raise ValueError(f"not a format-{FORMAT} voice file")
            validate({"op": "encoded", "batch": 0, "id": "file", "voice": obj["voice"]}, FROM_SIDECAR)
            name, created_at, transcript = obj["name"], obj["created_at"], obj["transcript"]
            if not (isinstance(name, str) and isinstance(created_at, int) and isinstance(transcript, str)):
                raise ValueError("name, created_at or transcript of the wrong type")
            return cls(name, created_at, transcript, obj["voice"], dict(obj.get("source") or {}))
        except (ProtocolError, KeyError, TypeError, ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
            raise ValueError(str(exc)) from None


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

    def list(self) -> list[SavedVoice]:
        return sorted(self.voices.values(), key=lambda v: (v.created_at, v.name))

    def path(self, name: str) -> Path:
        return self.directory / f"{name}{SUFFIX}"

    def check_free(self, name: str) -> None:
        if name in self.voices:
            raise Conflict(f"a voice named {name!r} exists already; delete it first to replace it", param="name")

    def add(self, name: str, transcript: str, voice: VoicePayload, source: dict[str, Any]) -> SavedVoice:
        """Write a new voice; Conflict if the name is taken (also by a concurrent upload)."""
        self.check_free(name)
        saved = SavedVoice(name, int(time.time()), transcript, voice, source)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._write_new(self.path(name), saved.to_file())
        except FileExistsError:
            raise Conflict(f"a voice named {name!r} exists already; delete it first to replace it", param="name") from None
        except OSError as exc:
            log.error("cannot save voice %r in %s: %s", name, self.directory, exc)
            raise ServerError(f"the voice could not be saved: {exc.strerror or exc}") from None
        self.voices[name] = saved
        log.info("saved voice %r (%.1f s prompt)", name, saved.duration_s)
        return saved

    def delete(self, name: str) -> bool:
        if name not in self.voices:
            return False
        try:
            os.unlink(self.path(name))
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise ServerError(f"the voice could not be deleted: {exc.strerror or exc}") from None
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
    """One-shot clone prompts, by a digest of the upload and its transcript; least recently used out."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.prompts: OrderedDict[str, VoicePayload] = OrderedDict()

    @staticmethod
    def key(audio: bytes, transcript: str, preprocess: bool) -> str:
        digest = hashlib.sha256(audio)
        digest.update(b"\0" + transcript.encode() + b"\0" + bytes([preprocess]))
        return digest.hexdigest()

    def get(self, key: str) -> VoicePayload | None:
        prompt = self.prompts.get(key)
        if prompt is not None:
            self.prompts.move_to_end(key)
        return prompt

    def put(self, key: str, prompt: VoicePayload) -> None:
        if self.size <= 0:
            return
        self.prompts[key] = prompt
        self.prompts.move_to_end(key)
        while len(self.prompts) > self.size:
            self.prompts.popitem(last=False)
