"""The `synth` command's manifest, and which of its items a run has submitted already.

A manifest has one speech request per line, as `POST /v1/jobs` takes its items; a line without
an "id" is named after its line number, and an item's id names its file, so ids follow the
server's rule and are unique. The run's state (`DIR/.synth-state.json`) keeps each submitted
item's job and position with a digest of its body: an item edited since is submitted again.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from supervisor.errors import InvalidRequest
from supervisor.jobs import item_fields
from supervisor.speech.audio.formats import FORMATS

STATE_FILE = ".synth-state.json"


class ManifestError(Exception):
    """Lines of the manifest that cannot be submitted; one message per problem."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class ManifestEntry:
    line: int
    id: str
    item: dict[str, object]  # as submitted, "id" included
    format: str | None  # None: the server's default (--default-response-format)

    def is_in(self, out: Path) -> bool:
        """Its result is in `out` already (with no format given, a file in any format counts)."""
        return any(
            (out / f"{self.id}.{fmt}").exists()
            for fmt in ([self.format] if self.format else FORMATS)
        )

    @property
    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.item, sort_keys=True).encode()).hexdigest()

    def where(self) -> str:
        return f"{self.id} (line {self.line})"


def read_manifest(path: Path) -> list[ManifestEntry]:
    entries: list[ManifestEntry] = []
    problems: list[str] = []
    seen: dict[str, int] = {}  # id -> the line it is first on
    with open(path, encoding="utf-8") as lines:
        for number, text in enumerate(lines, start=1):
            if not text.strip():
                continue
            try:
                item = json.loads(text)
            except ValueError as exc:
                problems.append(f"{path}:{number}: not JSON ({exc})")
                continue
            if not isinstance(item, dict):
                problems.append(f"{path}:{number}: a line must be a JSON object (a speech request)")
                continue
            item_id = item.setdefault("id", str(number))
            fmt = item.get("response_format")
            if (wrong := _id_problem(item_id)) is not None:
                problems.append(f"{path}:{number}: {wrong}")
            elif item_id in seen:
                problems.append(
                    f'{path}:{number}: "id" {item_id!r} is also on line {seen[item_id]}'
                )
            elif fmt is not None and (not isinstance(fmt, str) or not fmt.isalnum()):
                problems.append(
                    f'{path}:{number}: "response_format" must be a format name; got {fmt!r}'
                )
            else:
                seen[item_id] = number
                entries.append(ManifestEntry(number, item_id, item, fmt))
    if problems:
        raise ManifestError(problems)
    return entries


def _id_problem(value: object) -> str | None:
    """What the server would say of this item id (supervisor/jobs/item_fields.py), or None."""
    try:
        item_fields.item_id(value)
    except InvalidRequest as exc:
        return exc.message
    return None


class Submitted(TypedDict):
    """Where an item went: its job, its position in it, and the digest of what was sent."""

    job: str
    n: int
    digest: str


class RunState:
    """Which job and position each submitted item has: DIR/.synth-state.json, replaced atomically."""

    def __init__(self, out: Path) -> None:
        self.path = out / STATE_FILE
        self.items: dict[str, Submitted] = {}
        if self.path.is_file():
            try:
                self.items = json.loads(self.path.read_text())["items"]
            except (ValueError, KeyError, TypeError):
                self.items = {}  # unreadable: items are submitted again, under the same idempotency keys

    def record(self, entry: ManifestEntry, job_id: str, n: int) -> None:
        self.items[entry.id] = {"job": job_id, "n": n, "digest": entry.digest}

    def job_of(self, entry: ManifestEntry) -> tuple[str, int] | None:
        found = self.items.get(entry.id)
        if found is None or found.get("digest") != entry.digest:
            return None
        return found["job"], found["n"]

    def save(self) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps({"version": 1, "items": self.items}, indent=1))
        os.replace(tmp, self.path)
