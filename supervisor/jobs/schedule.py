"""A job's schedule, read from its body: when it may start (`not_before`), when it should be done
(`deadline`), and where to say it ended (`callback_url`, signed with `callback_secret` when
given); and the RFC 3339 times the API shows.

The fields are declared once (`ScheduleFields`): the declaration validates them (each check's
own message and `param`, supervisor/speech/request/body_errors.py) and writes their JSON Schema
for the OpenAPI document's job body. The rules across fields follow (`job_schedule`).

Times must be RFC 3339 with an offset (`2026-12-01T06:00:00Z`, `...+01:00`): a time without one
would mean whatever zone the server runs in, and within years 1 to 9999 once in UTC (what can be
shown again). `deadline` must come after `not_before`. A deadline
already past is accepted (the job is at risk at once): a client replaying its submission with the
same Idempotency-Key after the deadline must get its job back, not a 400.
"""

from __future__ import annotations

import datetime as dt
import functools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, ValidationInfo

from supervisor.errors import InvalidRequest
from supervisor.jobs import callbacks
from supervisor.speech.request.body_errors import validated
from supervisor.speech.request.speech_body import NoTitles, checked, written_schema

# The times a datetime can show in UTC, to the millisecond: what the API accepts and renders.
EARLIEST = dt.datetime(1, 1, 1, tzinfo=dt.timezone.utc).timestamp()
LATEST = dt.datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=dt.timezone.utc).timestamp()
RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})")


@dataclass(frozen=True)
class JobSchedule:
    """Unix times (seconds) and the callback address; None where the body gave none."""

    not_before: float | None = None
    deadline: float | None = None
    callback_url: str | None = None
    callback_secret: str | None = field(default=None, repr=False)  # signs this job's callback

    def fields(self) -> dict[str, float | str]:
        """The fields given, for the Idempotency-Key digest (none given: the digest of old)."""
        return {name: value for name, value in vars(self).items() if value is not None}


def parse_time(value: Any, param: str) -> float:
    """An RFC 3339 time with an offset, as Unix seconds; InvalidRequest naming `param` otherwise."""
    if not isinstance(value, str) or not RFC3339.fullmatch(value):
        raise InvalidRequest(
            f"'{param}' must be an RFC 3339 time with an offset, such as "
            f'"2026-12-01T06:00:00Z" or "2026-12-01T07:00:00+01:00"; got {value!r}.',
            param=param,
        )
    try:
        # fromisoformat takes no more than microseconds: nanoseconds are cut, not refused.
        text = re.sub(r"(\.\d{6})\d+", r"\1", value.upper().replace("Z", "+00:00"))
        seconds = dt.datetime.fromisoformat(text).timestamp()
    except (ValueError, OverflowError) as exc:  # the right shape, not a real time: 2026-02-30
        raise InvalidRequest(
            f"'{param}' is not a valid time: {exc}; got {value!r}.", param=param
        ) from None
    if not EARLIEST <= seconds <= LATEST:  # 9999-12-31T23:59:59-14:00 is in the year 10000
        raise InvalidRequest(
            f"'{param}' must be a time from 0001-01-01 to 9999-12-31 in UTC, which the API can "
            f"show again; got {value!r}.",
            param=param,
        )
    return seconds


def rfc3339(seconds: float | None) -> str | None:
    """Unix seconds as RFC 3339 in UTC, to the millisecond; None stays None. A time outside the
    range (a row stored before times were checked on the way in) is shown as the nearest one
    inside it, so that no stored value can break a read."""
    if seconds is None or math.isnan(seconds):
        return None
    seconds = min(LATEST, max(EARLIEST, seconds))
    when = dt.datetime.fromtimestamp(seconds, dt.timezone.utc)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _time(value: object, info: ValidationInfo) -> float:
    """A time field: RFC 3339 in the body, Unix seconds once read."""
    return checked(functools.partial(parse_time, param=str(info.field_name)))(value)


Time = Annotated[float | None, PlainValidator(_time)]
TIME_SCHEMA = written_schema({"type": "string", "format": "date-time"})


def _callback_url(value: object, info: ValidationInfo) -> str:
    """The URL checked against the server's --callback-allow (the validation context)."""
    allow: tuple[str, ...] = (info.context or {}).get("callback_allow", ())
    return checked(functools.partial(callbacks.check_url, allow=allow))(value)


class ScheduleFields(BaseModel):
    """A job body's schedule fields; None where not given."""

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)

    not_before: Time = Field(None, json_schema_extra=TIME_SCHEMA)
    deadline: Time = Field(None, json_schema_extra=TIME_SCHEMA)
    callback_url: Annotated[str | None, PlainValidator(_callback_url)] = Field(
        None, json_schema_extra=written_schema({"type": "string", "format": "uri"})
    )
    callback_secret: Annotated[str | None, PlainValidator(checked(callbacks.check_secret))] = Field(
        None,
        json_schema_extra=written_schema(
            {
                "type": "string",
                "pattern": callbacks.SECRET_PATTERN,
                "writeOnly": True,
                "description": "signs this job's callback in place of the key's secret; "
                "never shown back",
            }
        ),
    )


FIELDS = frozenset(ScheduleFields.model_fields)


def properties() -> dict[str, dict[str, object]]:
    """The schedule fields as the job body's properties."""
    schema = ScheduleFields.model_json_schema(schema_generator=NoTitles)
    fields: dict[str, dict[str, object]] = schema["properties"]
    return dict(fields)


def job_schedule(body: Mapping[str, object], callback_allow: tuple[str, ...]) -> JobSchedule:
    """The schedule fields of a job's body, checked; InvalidRequest names the field at fault."""
    given = {name: body[name] for name in FIELDS if name in body}
    fields = validated(ScheduleFields, given, {"callback_allow": callback_allow})
    if (
        fields.not_before is not None
        and fields.deadline is not None
        and fields.deadline <= fields.not_before
    ):
        raise InvalidRequest(
            f"'deadline' ({body['deadline']}) must come after 'not_before' ({body['not_before']}).",
            param="deadline",
        )
    if fields.callback_secret is not None and fields.callback_url is None:
        raise InvalidRequest(
            "'callback_secret' signs the job's callback: give 'callback_url' too, or leave it out.",
            param="callback_secret",
        )
    return JobSchedule(
        fields.not_before, fields.deadline, fields.callback_url, fields.callback_secret
    )
