"""The settings' fields: each declares its default, type, help text and bounds once.

They are declared by subsystem: the server's and its requests' (server_fields.py), the
sidecars' (sidecar_fields.py), the jobs' (job_fields.py); `Fields` joins them in that order. The
environment variable (OMNIVOICE_<NAME>), the `--flag`, the `--help` text and the settings
table in the docs are all derived from these declarations (flags.py, sources.py); the bounds are
checked in one loop and the rules between fields after it (rules.py); other systems' names for a
setting live in aliases.py. Nothing writes to a Settings after startup; facts learned at run time
(sample rate, devices found) live elsewhere.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from supervisor.settings import rules
from supervisor.settings.declare import redacted_url
from supervisor.settings.job_fields import JobFields
from supervisor.settings.server_fields import ServerFields
from supervisor.settings.sidecar_fields import SidecarFields


@dataclass(frozen=True)
class Fields(JobFields, SidecarFields, ServerFields):
    """Every setting, in the order of `--help`: the server's, the sidecars', the jobs'."""

    def __post_init__(self) -> None:
        rules.check_bounds(self)
        rules.check_rules(self)

    def public(self) -> dict[str, object]:
        """The settings in effect, for /health; API keys are never shown."""
        values = dataclasses.asdict(self)
        values["api_keys"] = len(self.api_keys)
        values["store"] = redacted_url(self.store)
        del values["callback_secret"]  # set whenever --callback-allow is (rules.py)
        return values
