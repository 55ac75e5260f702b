"""Pronunciation lexicons: named word → spoken-form lists, one JSON file each, beside the voices.

    <data dir>/lexicons/<name>.json
    {"name", "language", "voice", "entries": {"word": "spoken form"}, "updated_at"}

A request names one (`lexicon`); its entries replace whole words, case-sensitively, longest
first and in one pass (a replacement is never replaced again), in every span of the request's
text whose language is the lexicon's (or not known), before normalisation and chunking. So an
entry wins over the normaliser: `"Dr.": "Drive"` is read "Drive", not "Doctor". A lexicon with
a `voice` applies only to the spans read in that voice (a dialogue turn, an SSML <voice>, or
the request's own voice). A PUT replaces a lexicon whole: written to a temporary file,
flushed, then renamed over the old one. A lexicon is its API key's (`owner`, in its file; one
stored before owners existed is the default owner's): speech.stores.access says who may use it.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypedDict

from sidecar.shared.text import contains_cjk
from supervisor.errors import InvalidRequest, NotFound
from supervisor.speech.request import field_checks, schemas
from supervisor.storage_errors import storage_error
from supervisor.tenants import DEFAULT_OWNER, OWNER_NAME

log = logging.getLogger("omnivoice.lexicons")
SUFFIX = ".json"
MAX_ENTRIES = 10_000
MAX_ENTRY_CHARS = 200
MAX_BODY_BYTES = 4 * 2**20
FIELDS = frozenset({"language", "voice", "entries"})


class LexiconObject(TypedDict):
    """A lexicon as the API shows it."""

    name: str
    object: Literal["audio.lexicon"]
    language: str
    voice: str | None
    entries: dict[str, str]
    updated_at: int


@dataclass(frozen=True)
class Lexicon:
    name: str
    language: str
    entries: dict[str, str]
    updated_at: int
    voice: str | None = None  # only the spans read in this voice (None: every span)
    owner: str = DEFAULT_OWNER  # supervisor.tenants

    def public(self) -> LexiconObject:
        return {
            "name": self.name,
            "object": "audio.lexicon",
            "language": self.language,
            "voice": self.voice,
            "entries": self.entries,
            "updated_at": self.updated_at,
        }

    def applies_to(self, language: str | None, voice: str | None = None) -> bool:
        """Whether it applies to a span in `language` (None: not known) read in `voice`."""
        in_language = language is None or language == self.language
        return in_language and (self.voice is None or voice == self.voice)

    def apply(self, text: str) -> str:
        if not self.entries:
            return text
        return _pattern(tuple(self.entries)).sub(lambda m: self.entries[m.group(0)], text)


def _wordlike(ch: str) -> bool:
    return (ch.isalnum() or ch == "_") and not contains_cjk(ch)


def _bounded(word: str) -> str:
    """A word matched whole, not inside a longer one; a CJK edge needs no boundary (no spaces)."""
    before = r"(?<!\w)" if _wordlike(word[0]) else ""
    after = r"(?!\w)" if _wordlike(word[-1]) else ""
    return before + re.escape(word) + after


@functools.lru_cache(maxsize=16)
def _pattern(words: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(_bounded(w) for w in sorted(words, key=len, reverse=True)))


def not_found(name: str) -> InvalidRequest:
    error = InvalidRequest(
        f"Lexicon {name!r} not found: PUT /v1/audio/lexicons/{{name}} saves one.", param="lexicon"
    )
    error.code = "lexicon_not_found"
    return error


def parse(name: str, body: Any, owner: str = DEFAULT_OWNER) -> Lexicon:
    """A PUT body as `owner`'s Lexicon; 400 naming the field that is wrong."""
    schemas.voice_name(name, "lexicon")  # the same rule as a voice's name
    if not isinstance(body, dict):
        raise InvalidRequest(
            'The request body must be a JSON object {"language": ..., "entries": {...}}.'
        )
    unknown = sorted(set(body) - FIELDS)
    if unknown:
        raise InvalidRequest(
            f"Unrecognized field(s): {', '.join(unknown)}. Accepted: entries, language, voice.",
            param=unknown[0],
        )
    language = schemas.language(field_checks.string(body, "language"))
    if language is None:
        raise InvalidRequest("Missing required field: 'language' (such as 'en').", param="language")
    voice = body.get("voice")
    if voice is not None and (not isinstance(voice, str) or not voice.strip()):
        raise InvalidRequest(
            "'voice' is the voice this lexicon is for: a saved voice or an OpenAI voice name "
            "(leave it out for every voice).",
            param="voice",
        )
    voice = schemas.voice(voice) if voice is not None else None  # 'Alloy' is alloy
    entries = body.get("entries")
    if not isinstance(entries, dict):
        raise InvalidRequest("'entries' must be an object of word -> spoken form.", param="entries")
    if len(entries) > MAX_ENTRIES:
        raise InvalidRequest(
            f"'entries' has {len(entries)} words; at most {MAX_ENTRIES} are accepted.",
            param="entries",
        )
    for word, spoken in entries.items():
        if not word.strip() or word != word.strip() or len(word) > MAX_ENTRY_CHARS:
            raise InvalidRequest(
                f"entry {word!r}: a word is 1 to {MAX_ENTRY_CHARS} characters, without spaces "
                "around it",
                param="entries",
            )
        if not isinstance(spoken, str) or not spoken.strip() or len(spoken) > MAX_ENTRY_CHARS:
            raise InvalidRequest(
                f"entry {word!r}: its spoken form must be a string of 1 to {MAX_ENTRY_CHARS} "
                "characters",
                param="entries",
            )
    return Lexicon(name, language, dict(entries), int(time.time()), voice, owner)


class LexiconStore:
    """The lexicons of one data directory, kept in memory and on disk. `put` and `delete` write
    the disk: call them off the event loop. Each holds the store's lock, so that two writes of
    one name leave the file and the memory agreeing."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.lexicons: dict[str, Lexicon] = {}
        self.lock = threading.Lock()
        for path in sorted(directory.glob(f"*{SUFFIX}")) if directory.is_dir() else []:
            try:
                data = json.loads(path.read_text())
                lexicon = Lexicon(
                    data["name"],
                    data["language"],
                    data["entries"],
                    data["updated_at"],
                    data.get("voice"),
                    data.get("owner", DEFAULT_OWNER),
                )
                if not OWNER_NAME.fullmatch(lexicon.owner):
                    raise ValueError(f"its owner {lexicon.owner!r} is not an owner's name")
            except (OSError, ValueError, KeyError, TypeError) as exc:
                log.warning("skipping %s: not a readable lexicon (%s)", path, exc)
                continue
            self.lexicons[lexicon.name] = lexicon

    def get(self, name: str) -> Lexicon | None:
        return self.lexicons.get(name)

    def for_request(self, request: schemas.SpeechRequest) -> Lexicon | None:
        """The request's lexicon; a 400 on 'lexicon' if there is none by that name."""
        if request.lexicon is None:
            return None
        found = self.lexicons.get(request.lexicon)
        if found is None:
            raise not_found(request.lexicon)
        return found

    def put(
        self, lexicon: Lexicon, settle: Callable[[Lexicon | None], Lexicon] | None = None
    ) -> bool:
        """Save it, replacing one of that name; whether one was replaced. `settle`, given the
        one it would replace (or None), says what to save instead, or raises (under the lock,
        so that no other write of the name comes between)."""
        with self.lock:
            replaced = lexicon.name in self.lexicons
            if settle is not None:
                lexicon = settle(self.lexicons.get(lexicon.name))
            self._write(lexicon)
            self.lexicons[lexicon.name] = lexicon
            return replaced

    def _write(self, lexicon: Lexicon) -> None:
        final = self.directory / f"{lexicon.name}{SUFFIX}"
        temporary = final.with_name(f".{final.name}.{uuid.uuid4().hex}.tmp")
        data = {k: v for k, v in lexicon.public().items() if k != "object"}
        data["owner"] = lexicon.owner
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            with open(temporary, "x", encoding="utf-8") as f:
                json.dump(data, f, ensure_ascii=False)
                f.flush()
                os.fsync(f.fileno())
            os.replace(temporary, final)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise storage_error(exc, "the lexicon could not be saved") from None

    def delete(self, name: str) -> None:
        with self.lock:
            if name not in self.lexicons:
                raise NotFound(f"no lexicon named {name!r}", param="name")
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.directory / f"{name}{SUFFIX}")
            del self.lexicons[name]
