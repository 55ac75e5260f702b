"""supervisor/jobs/schedule.py: a job's schedule fields (times in RFC 3339, the deadline after
`not_before`, the callback's own secret), checked on the way in and shown in UTC."""

from __future__ import annotations

import pytest

from supervisor.errors import InvalidRequest
from supervisor.jobs import body
from supervisor.jobs.schedule import (
    FIELDS,
    JobSchedule,
    job_schedule,
    parse_time,
    properties,
    rfc3339,
)

SIX_UTC = 1796104800.0  # 2026-12-01T06:00:00Z


@pytest.mark.parametrize(
    "text",
    [
        "2026-12-01T06:00:00Z",
        "2026-12-01t06:00:00z",
        "2026-12-01T07:00:00+01:00",
        "2026-12-01 01:00:00-05:00",
        "2026-12-01T06:00:00.000000001Z",
    ],
)
def test_rfc3339_times_with_any_offset_read_as_the_same_instant(text: str) -> None:
    assert parse_time(text, "not_before") == pytest.approx(SIX_UTC)


@pytest.mark.parametrize(
    "value",
    [
        "2026-12-01T06:00:00",
        "2026-12-01",
        "tomorrow",
        1796104800,
        "2026-02-30T06:00:00Z",
        "2026-12-01T25:00:00Z",
        None,
    ],
)
def test_a_time_without_an_offset_or_not_a_time_is_a_400_naming_the_field(value: object) -> None:
    with pytest.raises(InvalidRequest) as raised:
        parse_time(value, "deadline")
    assert raised.value.status == 400 and raised.value.param == "deadline"


def test_times_are_shown_in_utc_to_the_millisecond() -> None:
    assert rfc3339(SIX_UTC + 0.25) == "2026-12-01T06:00:00.250Z"
    assert rfc3339(None) is None


@pytest.mark.parametrize(
    "value", ["9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59.9999Z"]
)
def test_a_time_that_is_not_in_years_1_to_9999_in_utc_is_a_400(value: str) -> None:
    """It could be stored, but not shown again: refused on the way in."""
    with pytest.raises(InvalidRequest) as raised:
        parse_time(value, "not_before")
    assert raised.value.status == 400 and raised.value.param == "not_before"
    assert parse_time("9999-12-31T23:59:59+00:00", "deadline") > SIX_UTC


def test_a_stored_time_past_the_range_is_shown_as_the_nearest_in_it() -> None:
    """Rows stored before times were checked on the way in still render."""
    year_10000 = 253402351199.0  # 9999-12-31T23:59:59-14:00, as once stored
    assert rfc3339(year_10000) == rfc3339(1e300) == "9999-12-31T23:59:59.998Z"
    assert rfc3339(-1e300) == "0001-01-01T00:00:00.000Z"
    assert rfc3339(float("nan")) is None


def test_a_deadline_must_come_after_not_before() -> None:
    body = {"not_before": "2026-12-01T06:00:00Z", "deadline": "2026-12-01T06:00:00Z"}
    with pytest.raises(InvalidRequest) as raised:
        job_schedule(body, ())
    assert raised.value.param == "deadline" and "after 'not_before'" in raised.value.message
    body["deadline"] = "2026-12-01T06:30:00+00:00"
    assert job_schedule(body, ()) == JobSchedule(SIX_UTC, SIX_UTC + 1800, None)
    assert job_schedule({}, ()).fields() == {}


@pytest.mark.parametrize(
    "secret",
    [
        None,
        12345,
        "x" * 15,
        "x" * 257,
        "sixteen chars ok",
        "tab\tin-the-secret-here",
        "caf\u00e9-secret-value-here",
        "line\nbreak-secret-value",
    ],
)
def test_a_jobs_callback_secret_out_of_bounds_is_a_400_that_does_not_repeat_it(
    secret: object,
) -> None:
    body = {"callback_url": "http://127.0.0.1:9393/hook", "callback_secret": secret}
    if secret is None:  # no secret: the owner's signs it
        assert job_schedule(body, ("127.0.0.1:*",)).callback_secret is None
        return
    with pytest.raises(InvalidRequest) as caught:
        job_schedule(body, ("127.0.0.1:*",))
    assert caught.value.param == "callback_secret" and str(secret) not in caught.value.message


def test_a_jobs_callback_secret_is_kept_hidden_and_needs_a_callback_url() -> None:
    secret = "w" * 16 + "!~" + "z" * 238  # 256 characters, the bounds' printable ASCII
    when = job_schedule(
        {"callback_url": "http://127.0.0.1/", "callback_secret": secret}, ("127.0.0.1",)
    )
    assert when.callback_secret == secret and secret not in repr(when)
    assert when.fields()["callback_secret"] == secret  # counts in the Idempotency-Key digest
    with pytest.raises(InvalidRequest) as caught:
        job_schedule({"callback_secret": secret}, ("127.0.0.1",))
    assert caught.value.param == "callback_secret"


def test_the_declaration_is_the_schema_and_the_body_s_field_list() -> None:
    schema = properties()
    assert set(schema) == FIELDS and FIELDS < body.FIELDS
    assert schema["not_before"] == schema["deadline"] == {"type": "string", "format": "date-time"}
    assert schema["callback_url"] == {"type": "string", "format": "uri"}


@pytest.mark.parametrize(
    ("field", "value"),
    [("not_before", 5), ("deadline", "tomorrow"), ("callback_url", 5), ("callback_url", "")],
)
def test_each_field_s_error_names_it(field: str, value: object) -> None:
    with pytest.raises(InvalidRequest) as caught:
        job_schedule({field: value}, ("127.0.0.1",))
    assert caught.value.status == 400 and caught.value.param == field


def test_a_callback_url_is_checked_against_the_allow_list_given() -> None:
    url = "http://127.0.0.1:9393/hook"
    assert job_schedule({"callback_url": url}, ("127.0.0.1:*",)).callback_url == url
    with pytest.raises(InvalidRequest) as caught:
        job_schedule({"callback_url": url}, ())
    assert caught.value.param == "callback_url" and "--callback-allow" in caught.value.message
