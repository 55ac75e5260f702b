"""API keys as tenants: who owns a job, a voice or a lexicon, and what a key may see.

Every key is a tenant with an owner id, stored with each job, voice and lexicon it makes: the
`name` the key file gives it, else the first 16 hex digits of the key's SHA-256 (stable, and
it does not reveal the key). A key sees and manages only what its owner id owns; another
key's things answer 404, as if they did not exist. An `admin` key sees and manages all. Voices
named `shared-voices:` in the key file are readable and usable by every key, and managed (made,
deleted) by admin keys only. With no key configured (an open server) every request is the one
tenant OPEN: the owner `default`, which sees all, as before keys were tenants. Rows and files
stored before owners existed belong to `default` too: a key named `default` gets them.

The key file (`--api-key-file`), one entry a line; blank lines and `#` comments are skipped:

    KEY                                   a key (a line as before owners existed)
    KEY name=alice admin                  a key named alice, which sees and manages all
    KEY name=bob callback-secret=S        bob's callbacks are signed with S
    shared-voices: narrator newsreader    voices every key may read and use

Several keys may share one name (a key being rotated): they are one tenant, so their options
must agree. Anything else in the file is an error naming its line, caught at start.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

DEFAULT_OWNER = "default"
# An owner's name, and a voice's: no '.', which a cache entry's name uses
OWNER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
SHARED_VOICES = "shared-voices:"
FLAGS = frozenset({"admin"})
OPTIONS = frozenset({"name", "callback-secret"})


@dataclass(frozen=True)
class Tenant:
    """What one key may do: its owner id, whether it is an admin, its callbacks' secret."""

    owner: str
    admin: bool = False
    callback_secret: str | None = None  # None: --callback-secret

    def sees(self, owner: str) -> bool:
        """Whether something owned by `owner` exists for this tenant."""
        return self.admin or owner == self.owner

    @property
    def scope(self) -> str | None:
        """The owner a store query is limited to; None (an admin): every owner."""
        return None if self.admin else self.owner


OPEN = Tenant(DEFAULT_OWNER, admin=True)  # every request of a server without keys


def owner_of(key: str) -> str:
    """The owner id of a key the key file does not name."""
    return hashlib.sha256(key.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class KeyFile:
    """A parsed key file: its keys' tenants (in the file's order) and the shared voices."""

    tenants: dict[str, Tenant] = field(default_factory=dict)
    shared_voices: frozenset[str] = frozenset()

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(self.tenants)


def parse_key_file(text: str) -> KeyFile:
    """The file's entries; ValueError naming the first bad line."""
    tenants: dict[str, Tenant] = {}
    shared: set[str] = set()
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            if line.startswith(SHARED_VOICES):
                shared.update(shared_voices(line[len(SHARED_VOICES) :]))
                continue
            key, *options = line.split()
            if key in tenants:
                raise ValueError("this key is also on an earlier line")
            tenants[key] = tenant(key, options)
        except ValueError as exc:
            raise ValueError(f"line {number}: {exc}") from None
    if not tenants:
        raise ValueError("it holds no key")
    agree(tenants.values())
    return KeyFile(tenants, frozenset(shared))


def shared_voices(names: str) -> list[str]:
    found = names.replace(",", " ").split()
    if not found:
        raise ValueError(f"'{SHARED_VOICES}' names no voice")
    for name in found:
        if not OWNER_NAME.fullmatch(name):  # the rule of a voice's name
            raise ValueError(f"{name!r} is not a voice name")
    return found


def tenant(key: str, options: list[str]) -> Tenant:
    """One key's line after the key: `admin`, `name=...`, `callback-secret=...`."""
    values: dict[str, str] = {}
    admin = False
    for option in options:
        name, equals, value = option.partition("=")
        if not equals and option in FLAGS:
            admin = True
        elif equals and name in OPTIONS and value and name not in values:
            values[name] = value
        else:
            raise ValueError(
                f"{option!r} is not an option: a key's line takes 'admin', 'name=NAME' and "
                "'callback-secret=SECRET', each once (a key is one word, without spaces)"
            )
    owner = values.get("name", owner_of(key))
    if not OWNER_NAME.fullmatch(owner):
        raise ValueError(
            f"name {owner!r}: 1 to 64 letters, digits, '_' or '-', starting with a letter or digit"
        )
    return Tenant(owner, admin, values.get("callback-secret"))


def agree(tenants: Iterable[Tenant]) -> None:
    """Keys sharing a name are one tenant: their options must be the same."""
    seen: dict[str, Tenant] = {}
    for one in tenants:
        other = seen.setdefault(one.owner, one)
        if other != one:
            raise ValueError(
                f"the keys named {one.owner!r} differ in 'admin' or 'callback-secret': keys "
                "sharing a name are one tenant"
            )


@dataclass(frozen=True)
class Tenancy:
    """Every key's tenant (the key file's, and a plain one for a key given any other way)."""

    by_key: dict[str, Tenant] = field(default_factory=dict)
    shared_voices: frozenset[str] = frozenset()
    operators: frozenset[str] = frozenset()  # owners of the keys given outside the key file

    @classmethod
    def of(cls, keys: Iterable[str], key_file: KeyFile) -> Tenancy:
        by_key = {key: key_file.tenants.get(key) or Tenant(owner_of(key)) for key in keys}
        operators = frozenset(owner_of(key) for key in by_key if key not in key_file.tenants)
        return cls(by_key, key_file.shared_voices, operators)

    def sees_server(self, one: Tenant) -> bool:
        """Whether a key sees the server's own details (its paths, its global counters): an
        admin key, or a key given on the command line or in the environment (the operator's);
        a key of the key file that is not an admin is a tenant, and sees neither."""
        return one.admin or one.owner in self.operators

    def for_owner(self, owner: str) -> Tenant:
        """The tenant of an owner id (a job's, for its callback); OPEN's powers on an open
        server; an owner no key has any more is a plain tenant of its own."""
        if not self.by_key:
            return OPEN
        for one in self.by_key.values():
            if one.owner == owner:
                return one
        return Tenant(owner)
