"""The one settings object: defaults in code, then OMNIVOICE_* variables, then command-line flags.

Three parts: the fields with their defaults, help, bounds and the rules between them
(fields.py with its parts by subsystem, rules.py, declare.py); the flags and the environment
(flags.py, sources.py); other systems' names for our settings (aliases.py, docs/MIGRATING.md).
`Settings` adds what is derived from the fields: the keys of --api-key-file, read before the
object is built, the tenancy, and each subsystem's section of the settings (sections.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from supervisor.settings import flags, sources
from supervisor.settings.aliases import DTYPE_NAMES, IGNORED, EnvAlias, Ignored
from supervisor.settings.declare import (
    ENV_PREFIX,
    SettingsError,
    env_of,
    flag_of,
    is_loopback,
    named,
    redacted_url,
    setting,
)
from supervisor.settings.fields import Fields
from supervisor.settings.flags import HELP_GROUPS
from supervisor.settings.sections import (
    HttpSettings,
    JobSettings,
    SchedulingSettings,
    ServerSettings,
    SidecarSettings,
    SpeechSettings,
    SupervisionSettings,
    cut,
)
from supervisor.settings.server_fields import ALLOWED_HOST, FORMAT_NAMES
from supervisor.tenants import KeyFile, Tenancy, parse_key_file

__all__ = [
    "ALLOWED_HOST",
    "DTYPE_NAMES",
    "ENV_PREFIX",
    "FORMAT_NAMES",
    "HELP_GROUPS",
    "IGNORED",
    "EnvAlias",
    "HttpSettings",
    "Ignored",
    "JobSettings",
    "SchedulingSettings",
    "ServerSettings",
    "Settings",
    "SettingsError",
    "SidecarSettings",
    "SpeechSettings",
    "SupervisionSettings",
    "env_of",
    "flag_of",
    "is_loopback",
    "read_key_file",
    "redacted_url",
    "setting",
]


@dataclass(frozen=True, init=False)
class Settings(Fields):
    """Every setting, checked. `api_keys` holds the keys given and those of --api-key-file."""

    def __init__(self, **values: Any) -> None:
        path = values.get("api_key_file")
        given = tuple(values.get("api_keys", ()))
        values["api_keys"] = tuple(dict.fromkeys(given + _key_file(path).keys))
        super().__init__(**values)
        self.tenancy  # noqa: B018  # the key file's tenants now, at start, as its keys were

    @functools.cached_property
    def tenancy(self) -> Tenancy:
        """Every key's tenant, and the shared voices (supervisor.tenants); not a setting of its own."""
        return Tenancy.of(self.api_keys, _key_file(self.api_key_file))

    # Each subsystem's section (sections.py): what its classes take instead of the whole object.
    @functools.cached_property
    def http(self) -> HttpSettings:
        return cut(HttpSettings, self)

    @functools.cached_property
    def sidecar(self) -> SidecarSettings:
        return cut(SidecarSettings, self, data_dir=self.resolved_data_dir())

    @functools.cached_property
    def supervision(self) -> SupervisionSettings:
        return cut(SupervisionSettings, self, sidecar=self.sidecar)

    @functools.cached_property
    def scheduling(self) -> SchedulingSettings:
        owners = {tenant.owner for tenant in self.tenancy.by_key.values()}
        return cut(SchedulingSettings, self, several_owners=len(owners) > 1)

    @functools.cached_property
    def speech(self) -> SpeechSettings:
        return cut(SpeechSettings, self, cache_dir=self.resolved_cache_dir())

    @functools.cached_property
    def jobs(self) -> JobSettings:
        return cut(JobSettings, self)

    @functools.cached_property
    def server(self) -> ServerSettings:
        return cut(ServerSettings, self)

    @classmethod
    def from_sources(
        cls,
        flags: Mapping[str, Any] | None = None,
        environ: Mapping[str, str] | None = None,
        notes: list[str] | None = None,
    ) -> Settings:
        """Defaults, overridden by variables (ours, then the aliases), overridden by flags (attribute names).

        `notes` gets one line per decision worth logging: which of two variables won, a value
        converted, an ignored flag or variable of another system."""
        return sources.from_sources(cls, flags, environ, notes)

    @classmethod
    def from_namespace(
        cls,
        namespace: argparse.Namespace,
        environ: Mapping[str, str] | None = None,
        notes: list[str] | None = None,
    ) -> Settings:
        return sources.from_namespace(cls, namespace, environ, notes)

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        flags.add_arguments(cls, parser)

    @classmethod
    def table(cls) -> list[tuple[str, str, str, str]]:
        """(flag, variable, default, help) per field, for the docs."""
        return flags.table(cls)

    def resolved_data_dir(self) -> str:
        if self.data_dir:
            return self.data_dir
        state = os.environ.get("STATE_DIRECTORY")
        if state:
            return state.split(":")[0]
        return os.path.expanduser("~/.local/state/omnivoice-supervisor")

    def resolved_cache_dir(self) -> str:
        return self.cache_dir or os.path.join(self.resolved_data_dir(), "cache")


def _key_file(path: str | None) -> KeyFile:
    return read_key_file(path) if path else KeyFile()


def read_key_file(path: str) -> KeyFile:
    """The key file's keys, their names and options, and the shared voices (supervisor.tenants)."""
    where = named(next(f for f in dataclasses.fields(Fields) if f.name == "api_key_file"))
    try:
        text = Path(path).expanduser().read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(f"{where} cannot be read: {exc}") from None
    try:
        return parse_key_file(text)
    except ValueError as exc:
        raise SettingsError(f"{where} {path}: {exc}") from None
