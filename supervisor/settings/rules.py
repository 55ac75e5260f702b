"""The checks on a Settings: each field's declared bounds in one loop, then the rules between fields.

Every message names the setting by its flag and variable (declare.named), derived from the field.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING, Any

from sidecar.shared.thresholds import Thresholds
from supervisor.settings.declare import SettingsError, env_of, flag_of, named

if TYPE_CHECKING:
    from supervisor.settings.fields import Fields

Field = dataclasses.Field[Any]


def check_bounds(settings: Fields) -> None:
    """Each field's value within the bounds its declaration gives (declare.setting)."""
    for f in dataclasses.fields(settings):
        value = getattr(settings, f.name)
        entries = value if isinstance(value, tuple) else (value,)
        for entry in entries:
            problem = _number_problem(f, entry) or _text_problem(f, entry)
            if problem:
                hint = f.metadata["hint"]
                raise SettingsError(f"{named(f)} {problem}" + (f"; {hint}" if hint else ""))


def _number_problem(f: Field, value: Any) -> str | None:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    least, most, above = f.metadata["minimum"], f.metadata["maximum"], f.metadata["above"]
    if above is not None and value <= above:
        return f"must be greater than {above:g}, got {value}"
    if most is not None and not least <= value <= most:
        return f"must be between {least:g} and {most:g}, got {value}"
    if value < least:
        return f"must {'not be negative' if least == 0 else f'be at least {least:g}'}, got {value}"
    return None


def _text_problem(f: Field, value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    choices, pattern = f.metadata["choices"], f.metadata["pattern"]
    if choices and value not in choices:
        return f"must be one of {', '.join(choices)}, got {value!r}"
    if pattern and not re.fullmatch(pattern, value):
        return f"must be {f.metadata['shape']}; got {value!r}"
    return None


def check_rules(settings: Fields) -> None:
    """The checks that bounds cannot say: formats read by other code, and one field given another."""
    fields = {f.name: f for f in dataclasses.fields(settings)}
    for rule in (_thresholds, _log_run_id, _keys, _store, _callbacks, _model):
        problem = rule(settings, fields)
        if problem:
            raise SettingsError(problem)


def _thresholds(s: Fields, fields: dict[str, Field]) -> str | None:
    try:
        Thresholds.from_spec(s.qa_thresholds)
    except ValueError as exc:
        return f"{named(fields['qa_thresholds'])}: {exc}"
    return None


def _log_run_id(s: Fields, fields: dict[str, Field]) -> str | None:
    run_id, log_dir = flag_of(fields["log_run_id"]), fields["log_dir"]
    if s.log_run_id is None:
        return None
    if not s.log_dir:
        return f"{run_id} names a folder under {flag_of(log_dir)}: set {named(log_dir)} too"
    if not s.log_run_id or s.log_run_id in (".", "..", "latest") or "/" in s.log_run_id:
        return f"{run_id} must be a plain folder name (not 'latest'), got {s.log_run_id!r}"
    return None


def _keys(s: Fields, fields: dict[str, Field]) -> str | None:
    if all(key.strip() for key in s.api_keys):
        return None
    keys, key_file = fields["api_keys"], fields["api_key_file"]
    # An empty key would let `Authorization: Bearer ` in.
    return (
        f"an API key ({flag_of(keys)}, {env_of(keys)}, {flag_of(key_file)}) "
        "must not be empty or blank (a comma-separated list has no empty parts; "
        "unset the variable to run without keys)"
    )


def _store(s: Fields, fields: dict[str, Field]) -> str | None:
    if s.store == "sqlite" or s.store.startswith(("postgresql://", "postgres://")):
        return None
    # Only the scheme is shown: the rest may hold a password.
    scheme = s.store.split("://")[0]
    return f"{named(fields['store'])} must be sqlite or a postgresql:// URL, got {scheme!r}"


def _callbacks(s: Fields, fields: dict[str, Field]) -> str | None:
    if not s.callback_allow:
        return None
    allow, secret = fields["callback_allow"], fields["callback_secret"]
    if not s.callback_secret:
        return f"{flag_of(allow)} needs {named(secret)}: callbacks are always signed"
    from supervisor.settings.callback_allow import allowed_entry  # httpx: only with a list

    for entry in s.callback_allow:
        try:
            allowed_entry(entry)
        except ValueError as exc:
            return f"{named(allow)}: {exc}"
    return None


def _model(s: Fields, fields: dict[str, Field]) -> str | None:
    if s.engine != "omnivoice" or s.model:
        return None
    model = flag_of(fields["model"])
    return (
        f"{named(fields['model'])} is required: a checkpoint directory "
        f"({model} /path/to/checkpoint) or a Hugging Face id ({model} k2-fsa/OmniVoice)"
    )
