"""Where values come from: defaults, overridden by OMNIVOICE_* variables (ours, then the aliases),
overridden by flags (attribute names, as argparse leaves them).

Every decision worth logging (which of two variables won, a value converted, an ignored flag or
variable of another system, a flag and its alias both given) is returned as a note, which `serve`
logs once logging is up.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

from supervisor.settings.aliases import IGNORED, names_of
from supervisor.settings.declare import SettingsError, env_of, flag_of, scalar_type

T = TypeVar("T")
Field = dataclasses.Field[Any]

# Settings whose variable keeps its blank parts, so that the checks refuse them.
BLANKS_REFUSED = frozenset({"api_keys"})
# Where flags.Store notes which spelling of a flag was given.
SPELLINGS = "_spellings"


def from_sources(
    cls: type[T],
    flags: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    notes: list[str] | None = None,
) -> T:
    """A `cls` from defaults, the variables and the flags; `notes` gets the decisions."""
    environ = os.environ if environ is None else environ
    notes = [] if notes is None else notes
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    values: dict[str, object] = {}
    given_env: dict[str, list[str]] = {}
    for f in fields.values():
        found = _from_environment(f, hints[f.name], environ, notes)
        if found:
            values[f.name] = found[0][1]
            given_env[f.name] = [name for name, _ in found]
    for name, value in (flags or {}).items():
        value = tuple(value) if isinstance(value, list) else value
        if name in given_env and values[name] != value:
            shown = ",".join(value) if isinstance(value, tuple) else value
            notes.append(
                f"{' and '.join(given_env[name])} overridden by the command line ({flag_of(fields[name])} {shown})"
            )
        values[name] = value
    for entry in IGNORED:
        if entry.env and environ.get(entry.env) is not None:
            notes.append(entry.note(f"{entry.env}={environ[entry.env]}"))
    return cls(**values)


def _from_environment(
    f: Field, kind: Any, environ: Mapping[str, str], notes: list[str]
) -> list[tuple[str, Any]]:
    """(variable, value) for each of the setting's variables that is set, the winner first."""
    found: list[tuple[str, Any]] = []
    converted: str | None = None
    for alias in ((env_of(f), None), *((a.name, a.convert) for a in names_of(f.name).env)):
        name, convert = alias
        raw = environ.get(name)
        if raw is None:
            continue
        value = parse_env(f, kind, raw, name)
        if convert is not None:
            value, why = convert(value)
            if why and not found:  # said only of the variable that wins
                converted = f"{name}={raw}: {why}, so {flag_of(f)} is {value:g}"
        found.append((name, value))
    if converted:
        notes.append(converted)
    if len(found) > 1:
        losers = ", ".join(f"{name}={environ[name]}" for name, _ in found[1:])
        notes.append(
            f"{found[0][0]}={environ[found[0][0]]} and {losers} are {'both' if len(found) == 2 else 'all'} set: {found[0][0]} wins "
            "(our own name first, then the others in the order docs/MIGRATING.md lists)"
        )
    return found


def from_namespace(
    cls: type[T],
    namespace: argparse.Namespace,
    environ: Mapping[str, str] | None = None,
    notes: list[str] | None = None,
) -> T:
    """A `cls` from parsed flags (flags.add_arguments), the variables and the defaults."""
    notes = [] if notes is None else notes
    fields = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    given = vars(namespace)
    for dest, spellings in given.get(SPELLINGS, {}).items():
        if len(set(spellings)) > 1:
            notes.append(
                f"{' and '.join(dict.fromkeys(spellings))} both given: the last one ({spellings[-1]} {given[dest]}) wins"
            )
    for entry in IGNORED:
        if entry.dest in given:
            notes.append(entry.note(f"{entry.flags[0]} {given[entry.dest]}"))
    return from_sources(cls, {k: v for k, v in given.items() if k in fields}, environ, notes)


def parse_env(f: Field, kind: Any, raw: str, name: str | None = None) -> Any:
    """A variable's text as the setting's type (`name`: the variable, ours by default)."""
    name = name or env_of(f)
    raw = names_of(f.name).values.get(raw, raw)
    if kind is bool:
        lowered = raw.strip().lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off", ""):
            return False
        raise SettingsError(f"{name} must be true or false, got {raw!r}")
    if kind == tuple[str, ...]:
        parts = tuple(part.strip() for part in raw.split(","))
        if f.name in BLANKS_REFUSED:  # ", ," must not read as "no key at all": an open server
            return parts
        return tuple(part for part in parts if part)
    scalar = scalar_type(kind)
    if scalar is str:
        return raw if raw or kind is str else None
    if not raw.strip() and type(None) in typing.get_args(kind):
        return None  # an optional number left empty: not set
    try:
        return scalar(raw)
    except ValueError:
        raise SettingsError(f"{name} must be a number, got {raw!r}") from None
