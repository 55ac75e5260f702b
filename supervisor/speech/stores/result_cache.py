"""The result cache: finished answers on disk, by a hash of everything that shapes them.

Only reproducible answers are kept: a speech request that gives a `seed`, and every job item
(an item without a seed gets one derived from its fields, `item_seed`). The key (`key`) is a
SHA-256 over:

    the checkpoint's identity   its files' names, sizes and modification times (a hub id: the
                                id), the model dtype and devices (bfloat16 on GPU, float32 on
                                the CPU sound different), and CACHE_VERSION
    the request                 every validated field that reaches the audio: text, seed, steps,
                                guidance, speed, language, duration, denoise, chunk mode and
                                lengths, format, sample rate, loudness, and any field added later
                                (the fields left out are named in IGNORED)
    the voice                   the design instruct, or the saved/cloned prompt's content (its
                                codec tokens and transcript), and a named voice's default seed
    the chunking settings       --chunk-s, --text-chunk-words and the continuity limits
    the route                   speech or job: a long speech answer is encoded as a stream

An entry's name is the key, then `.<owner>`: the owner id of the API key whose request made it
(supervisor.tenants), so that one key never gets a hit on what another key synthesised (a hit
would tell it what the other sent). With --cache-shared the name is the key alone, one entry
for every API key. A purge removes one owner's entries, or (an admin's) all.

An entry is one file, `DIR/<name[:2]>/<name>`: a 4-byte big-endian length, that many bytes of JSON
(format, sample rate, seed, seconds, chunks), then the encoded file. Written to a temporary name
and renamed, so a reader sees a whole entry or none. Use is recorded in the file's modification
time, so the least recently used go first when the total passes --cache-max-bytes, and the order
survives a restart. The cache never fails a request: a write that fails (a full disk) is logged
once, its temporary file removed, and the answer goes out; an unreadable entry is a miss.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import struct
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from supervisor import metrics
from supervisor.qa_summary import QaSummary
from supervisor.settings import SidecarSettings, SpeechSettings
from supervisor.speech.request.schemas import MAX_SEED, SpeechRequest
from supervisor.speech.request.voice import Voice
from supervisor.tenants import DEFAULT_OWNER

log = logging.getLogger("omnivoice.cache")

CACHE_VERSION = 1  # raise when the audio path changes, so old entries are no longer found
TMP_SUFFIX = ".tmp"
# Request fields that do not change the bytes of the answer.
IGNORED = frozenset(
    {
        "model",
        "stream_format",
        "request_timeout_s",
        "instructions_read",
        "voice",
        "instructions",
        "tier",  # an item's tokens are the same whatever it runs beside
    }
)
# Server settings that shape the audio: chunking, normalisation, and the quality checks (a
# retry changes the seed a chunk is made with).
CHUNKING_SETTINGS = (
    "chunk_s",
    "text_chunk_words",
    "max_continuity_audio_tokens",
    "max_continuity_text_words",
    "normalize",
    "qa_retries",
    "qa_thresholds",
    "asr_model",  # its round trip can fail a chunk into a retry, too
)
_MODEL_FILES = (".json", ".safetensors", ".txt", ".model", ".tiktoken")


class CacheMeta(TypedDict):
    """What an entry keeps beside its audio, to answer from it as the answer was made."""

    format: str
    sample_rate: int  # the file's
    seed: int
    audio_s: float
    chunks: int
    qa: str | QaSummary  # a speech answer's X-OmniVoice-QA header, or a job item's `qa` block


@dataclass(frozen=True)
class CachedResult:
    data: bytes  # the encoded file
    meta: CacheMeta


def _canonical(value: Any) -> Any:
    """JSON-ready, with bytes as their SHA-256 (a voice prompt's tokens)."""
    if isinstance(value, bytes):
        return {"sha256": hashlib.sha256(value).hexdigest()}
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    return value


def _digest(value: Any) -> str:
    text = json.dumps(_canonical(value), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def checkpoint_identity(settings: SidecarSettings) -> str:
    """A hash naming the model a sidecar loads: a local checkpoint by its files' names, sizes
    and modification times (hashing gigabytes of weights at each start would take minutes)."""
    files: list[tuple[str, int, int]] = []
    root = Path(settings.model)
    if settings.engine == "omnivoice" and root.is_dir():
        for path in sorted(root.rglob("*")):
            if path.is_file() and path.suffix in _MODEL_FILES:
                stat = path.stat()
                files.append((str(path.relative_to(root)), stat.st_size, stat.st_mtime_ns))
    return _digest(
        {
            "version": CACHE_VERSION,
            "engine": settings.engine,
            "model": settings.model,
            "files": files,
            "dtype": settings.dtype,
            "devices": settings.devices,
        }
    )


def item_seed(fields: Mapping[str, object]) -> int:
    """The seed of a job item that names none: from its fields, so the same item sounds the same
    (and is found in the cache) in every job."""
    return int(_digest(fields)[:16], 16) % (MAX_SEED + 1)


def open_cache(settings: SpeechSettings, sidecar: SidecarSettings) -> ResultCache | None:
    """The server's result cache; None when --cache-max-bytes is 0 or its directory cannot be
    made (logged: the server runs on without one)."""
    if settings.cache_max_bytes == 0:
        return None
    cache = ResultCache(settings.cache_dir, settings.cache_max_bytes, checkpoint_identity(sidecar))
    try:
        cache.load()
    except OSError as exc:
        log.error("result cache: %s cannot be used (%s); running without one", cache.directory, exc)
        return None
    return cache


def cacheable(request: SpeechRequest) -> bool:
    """Reproducible, and shaped by nothing the key cannot see: a lexicon's entries, a dialogue's
    or an SSML document's other saved voices can change under the same request."""
    if request.seed is None or request.lexicon or request.dialogue:
        return False
    return not request.input.lstrip().startswith("<speak")


def key(  # noqa: PLR0913  what an entry depends on; the job item's own part by name
    identity: str,
    request: SpeechRequest,
    voice: Voice,
    settings: SpeechSettings,
    route: str,
    owner: str = DEFAULT_OWNER,
    *,
    first_chunk_s: float | None = None,
) -> str:
    """The cache entry of a reproducible answer (request.seed given) made for `owner`. `route`
    ("speech" or "job") keeps apart what is encoded differently: a long speech answer is a
    stream (a WAV header saying "until the end", an MP3 without its Xing frame), a job item a
    whole file. `first_chunk_s`, a job item's own first chunk, cuts the text differently."""
    fields = {k: v for k, v in dataclasses.asdict(request).items() if k not in IGNORED}
    keyed: dict[str, object] = {
        "route": route,
        "checkpoint": identity,
        "request": fields,
        "voice": {"instruct": voice.instruct, "prompt": voice.prompt, "seed": voice.seed},
        "settings": {name: getattr(settings, name) for name in CHUNKING_SETTINGS},
    }
    if first_chunk_s is not None:  # absent otherwise, so that every other entry keeps its name
        keyed["first_chunk_s"] = first_chunk_s
    digest = _digest(keyed)
    return digest if settings.cache_shared else f"{digest}.{owner}"


def entry_owner(name: str) -> str | None:
    """Whose an entry is: the owner its name ends with; None for a shared one (--cache-shared)."""
    return name.partition(".")[2] or None


class ResultCache:
    """Entries on disk under `directory`, at most `max_bytes` of them (LRU). Thread-safe: its
    methods are called from worker threads."""

    def __init__(self, directory: str | Path, max_bytes: int, identity: str = "") -> None:
        self.directory = Path(directory)
        self.max_bytes = max_bytes
        self.identity = identity  # checkpoint_identity: part of every key
        self.lock = threading.Lock()
        self.sizes: dict[str, int] = {}  # key -> bytes on disk
        self.used: dict[str, float] = {}  # key -> last use (the file's mtime)
        self.total = 0
        self.write_error: str | None = None

    def load(self) -> None:
        """Index what an earlier run left; remove its temporary files."""
        self.directory.mkdir(parents=True, exist_ok=True)
        for path in self.directory.glob("*/*"):
            if path.name.endswith(TMP_SUFFIX):
                path.unlink(missing_ok=True)
                continue
            stat = path.stat()
            self.sizes[path.name] = stat.st_size
            self.used[path.name] = stat.st_mtime
        self.total = sum(self.sizes.values())
        self._evict()
        metrics.result_cache_bytes.set(self.total)
        log.info(
            "result cache: %d entries, %d bytes in %s (at most %d)",
            len(self.sizes),
            self.total,
            self.directory,
            self.max_bytes,
        )

    def path(self, name: str) -> Path:
        return self.directory / name[:2] / name

    def get(self, name: str) -> CachedResult | None:
        """The entry, marked as used; None (a miss) if there is none or it cannot be read."""
        entry = self._read(name) if name in self.sizes else None
        if entry is None:
            metrics.result_cache_misses.inc()
            return None
        metrics.result_cache_hits.inc()
        now = time.time()
        with self.lock:
            self.used[name] = now
        # The order is kept in memory too: if the file's time cannot be set, only a restart
        # sees this use as older than it was.
        with contextlib.suppress(OSError):
            os.utime(self.path(name), (now, now))
        return entry

    def _read(self, name: str) -> CachedResult | None:
        try:
            raw = self.path(name).read_bytes()
            (length,) = struct.unpack(">I", raw[:4])
            meta = json.loads(raw[4 : 4 + length])
            return CachedResult(raw[4 + length :], meta)
        except (OSError, ValueError, struct.error) as exc:
            log.warning("result cache: entry %s cannot be read (%s); removing it", name, exc)
            self._forget(name)
            return None

    def put(self, name: str, entry: CachedResult) -> None:
        """Store an entry (temporary file, renamed); a failure is logged, never raised."""
        meta = json.dumps(entry.meta, separators=(",", ":")).encode()
        blob = struct.pack(">I", len(meta)) + meta + entry.data
        if len(blob) > self.max_bytes:
            return
        path = self.path(name)
        tmp = path.with_name(f".{name}.{uuid.uuid4().hex[:8]}{TMP_SUFFIX}")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(tmp, "wb") as out:
                out.write(blob)
            os.replace(tmp, path)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            if self.write_error is None:
                log.error("result cache: cannot write %s (%s); answers go out uncached", path, exc)
            self.write_error = str(exc)
            return
        if self.write_error is not None:
            log.info("result cache: writing works again")
            self.write_error = None
        with self.lock:
            self.total += len(blob) - self.sizes.get(name, 0)
            self.sizes[name] = len(blob)
            self.used[name] = time.time()
        self._evict()

    def _evict(self) -> None:
        while True:
            with self.lock:
                if self.total <= self.max_bytes or not self.used:
                    break
                oldest = min(self.used, key=self.used.__getitem__)
            self._forget(oldest)
        metrics.result_cache_bytes.set(self.total)

    def _forget(self, name: str) -> None:
        with self.lock:
            self.total -= self.sizes.pop(name, 0)
            self.used.pop(name, None)
        try:
            self.path(name).unlink(missing_ok=True)
        except OSError as exc:
            log.warning("result cache: cannot remove %s (%s)", name, exc)
        metrics.result_cache_bytes.set(self.total)

    def purge(self, owner: str | None = None) -> tuple[int, int]:
        """Remove `owner`'s entries, or (None) every entry: (entries, bytes) removed."""
        with self.lock:
            names = [n for n in self.sizes if owner is None or entry_owner(n) == owner]
            total = sum(self.sizes[n] for n in names)
        for name in names:
            self._forget(name)
        return len(names), total
