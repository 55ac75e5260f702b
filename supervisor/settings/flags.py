"""The command line: one flag per setting, grouped for `serve --help-all`, and the table for the docs.

Each flag, its placeholder and its help line (with the variable and the default) come from the
field's declaration. Other systems' spellings (aliases.py) are accepted but named once, in one short
section at the end. Flags left out fall through to the environment and the default (sources.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, TypedDict

from supervisor.settings.aliases import IGNORED, names_of
from supervisor.settings.declare import env_of, flag_of, scalar_type
from supervisor.settings.sources import SPELLINGS

Field = dataclasses.Field[Any]


class Options(TypedDict, total=False):
    """add_argument's keyword options, as the flags here use them."""

    dest: str
    default: object
    metavar: str
    action: Literal["append"] | type[argparse.Action]
    type: Callable[[str], object]
    choices: Iterable[object] | None


# serve --help: the group each field starts (fields follow in declaration order).
HELP_GROUPS = {
    "model": "common settings",
    "pid_file": "logs and the pid file",
    "max_input_chars": "requests",
    "engine": "sidecars and their supervision",
    "max_batch_size": "batching and admission",
    "qa_retries": "quality checks",
    "job_retention_s": "jobs",
}
COMPAT_TITLE = (
    "flags and variables of omnivoice-triton-server and OmniVoice-Studio (docs/MIGRATING.md)"
)


def add_arguments(cls: type, parser: argparse.ArgumentParser) -> None:
    """One flag per field of `cls`, in the groups of HELP_GROUPS, then the other systems' section."""
    hints = typing.get_type_hints(cls)
    group: Any = parser
    compat: list[str] = []
    for f in dataclasses.fields(cls):
        if f.name in HELP_GROUPS:
            group = parser.add_argument_group(HELP_GROUPS[f.name])
        options = _options(f, hints[f.name])
        shown = f"[env {env_of(f)}{_shown_default(f.default)}]"
        group.add_argument(
            flag_of(f), help=f"{f.metadata['help']} {shown}".replace("%", "%%"), **options
        )
        other = names_of(f.name)
        for alias in other.flags:
            parser.add_argument(alias, help=argparse.SUPPRESS, **options)
        spellings = [*other.flags, *(a.name for a in other.env)]
        if spellings:
            compat.append(f"{', '.join(spellings)} = {flag_of(f)}")
    _add_ignored(parser, compat)


def _options(f: Field, kind: Any) -> Options:
    """add_argument's options for a field of type `kind`."""
    options: Options = {"dest": f.name, "default": argparse.SUPPRESS}
    if kind is not bool and not f.metadata.get("choices"):
        options["metavar"] = f.metadata.get("metavar") or _metavar(f.name, kind)
    if kind is bool:
        options["action"] = argparse.BooleanOptionalAction
    elif kind == tuple[str, ...]:
        options["action"] = "append"
    else:
        options["action"] = Store
        options["type"] = _value_type(scalar_type(kind), names_of(f.name).values)
        options["choices"] = f.metadata.get("choices")
    return options


def _add_ignored(parser: argparse.ArgumentParser, compat: list[str]) -> None:
    """The other systems' section of the help, and their flags that mean nothing here."""
    ignored = [e for e in IGNORED if e.flags]
    compat.append(
        "accepted with no effect (each one given is logged with what this server "
        "does instead): " + ", ".join("/".join(e.flags) for e in ignored)
    )
    parser.add_argument_group(COMPAT_TITLE, "; ".join(compat).replace("%", "%%") + ".")
    for entry in ignored:
        options: Options = {"dest": entry.dest, "default": argparse.SUPPRESS}
        if entry.kind is bool:
            options["action"] = argparse.BooleanOptionalAction
        else:
            options["type"] = entry.kind
        parser.add_argument(*entry.flags, help=argparse.SUPPRESS, **options)


def table(cls: type) -> list[tuple[str, str, str, str]]:
    """(flag, variable, default, help) per field, for the docs."""
    return [
        (flag_of(f), env_of(f), repr(f.default), f.metadata["help"])
        for f in dataclasses.fields(cls)
    ]


def _metavar(name: str, kind: Any) -> str:
    """A short placeholder by unit or kind: --drain-s SECONDS, --max-upload-mb MB, --data-dir DIR."""
    units = (("_ms", "MS"), ("_s", "SECONDS"), ("_mb", "MB"), ("_dir", "DIR"), ("_file", "FILE"))
    for suffix, metavar in units:
        if name.endswith(suffix):
            return metavar
    return "N" if scalar_type(kind) in (int, float) else name.upper()


def _shown_default(default: Any) -> str:
    """'; default: X' for --help, or nothing where the default is 'not set'."""
    if default is None or default == "" or default == ():
        return ""
    return f"; default: {default}"


class Store(argparse.Action):
    """argparse's store, noting which spelling of a flag was used (a flag and its alias both given is a note)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, values)
        spellings: dict[str, list[str]] = namespace.__dict__.setdefault(SPELLINGS, {})
        spellings.setdefault(self.dest, []).append(option_string or self.dest)


def _value_type(scalar: Any, aliases: Mapping[str, str]) -> Any:
    """The flag's converter, taking another system's spelling of a value (fp16) as ours (float16)."""
    if not aliases:
        return scalar

    def convert(raw: str) -> Any:
        return scalar(aliases.get(raw, raw))

    convert.__name__ = getattr(scalar, "__name__", "value")
    return convert
