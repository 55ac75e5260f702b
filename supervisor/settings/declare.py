"""How a setting is declared: its default, help and bounds, and the flag and variable it derives."""

from __future__ import annotations

import dataclasses
import ipaddress
import typing
import urllib.parse
from dataclasses import field
from typing import Any

ENV_PREFIX = "OMNIVOICE_"


class SettingsError(ValueError):
    """A setting with a value it cannot take; the message names the flag and the variable."""


def setting(  # noqa: PLR0913  a field's declaration: each keyword one property, as dataclasses.field
    default: Any,
    help: str,
    *,
    flag: str | None = None,
    metavar: str | None = None,
    choices: tuple[str, ...] | None = None,
    minimum: float = 0,
    maximum: float | None = None,
    above: float | None = None,
    pattern: str | None = None,
    shape: str = "",
    hint: str = "",
) -> Any:
    """A field of Settings. Bounds (checked by rules.check_bounds, one loop over the fields):
    a number is at least `minimum` (0: never negative), at most `maximum`, greater than `above`;
    a text (or each entry of a list) is one of `choices` or matches `pattern`, which `shape` says in words.
    `hint` ends the message of a value out of bounds: what to do instead."""
    bounds = {
        "choices": choices,
        "minimum": minimum,
        "maximum": maximum,
        "above": above,
        "pattern": pattern,
        "shape": shape,
        "hint": hint,
    }
    return field(
        default=default, metadata={"help": help, "flag": flag, "metavar": metavar, **bounds}
    )


def flag_of(f: dataclasses.Field) -> str:  # type: ignore[type-arg]
    return f.metadata.get("flag") or "--" + f.name.replace("_", "-")


def env_of(f: dataclasses.Field) -> str:  # type: ignore[type-arg]
    return ENV_PREFIX + f.name.upper()


def named(f: dataclasses.Field) -> str:  # type: ignore[type-arg]
    """'--flag (OMNIVOICE_VARIABLE)': how an error message names a setting."""
    return f"{flag_of(f)} ({env_of(f)})"


def scalar_type(kind: Any) -> Any:
    """int, float or str: the type a flag's text is read as (Optional[X] reads as X)."""
    if kind in (int, float, str):
        return kind
    args = [a for a in typing.get_args(kind) if a is not type(None)]
    return args[0] if args else str


def redacted_url(url: str) -> str:
    """A database URL without its password (nor any query, which may carry one)."""
    parts = urllib.parse.urlsplit(url)
    if not parts.password and not parts.query:
        return url
    netloc = (
        parts.netloc.replace(f":{parts.password}@", ":***@") if parts.password else parts.netloc
    )
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def is_loopback(host: str) -> bool:
    """Whether an address to listen on is reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
