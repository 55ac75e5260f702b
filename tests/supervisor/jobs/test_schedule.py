"""A job's schedule fields, callback addresses and signatures, and the finish-time simulation."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from supervisor.errors import InvalidRequest
from supervisor.jobs.callbacks import Allowed, allowed_entry, check_url, signature
from supervisor.jobs.schedule import JobSchedule, job_schedule, parse_time, rfc3339
from supervisor.jobs.timeline import Pending, at_risk, finishes, item_audio_s
from supervisor.settings import Settings, SettingsError

SIX_UTC = 1796104800.0  # 2026-12-01T06:00:00Z


@pytest.mark.parametrize(
    "text",
    ["2026-12-01T06:00:00Z", "2026-12-01t06:00:00z", "2026-12-01T07:00:00+01:00",
     "2026-12-01 01:00:00-05:00", "2026-12-01T06:00:00.000000001Z"],
)  # fmt: skip
def test_rfc3339_times_with_any_offset_read_as_the_same_instant(text: str) -> None:
    assert parse_time(text, "not_before") == pytest.approx(SIX_UTC)


@pytest.mark.parametrize(
    "value",
    ["2026-12-01T06:00:00", "2026-12-01", "tomorrow", 1796104800, "2026-02-30T06:00:00Z",
     "2026-12-01T25:00:00Z", None],
)  # fmt: skip
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


def test_callbacks_go_only_to_hosts_on_the_allow_list() -> None:
    allow = ("hooks.example.com:8443", "127.0.0.1:*", "plain.example.com", "[::1]:9")
    assert check_url("https://HOOKS.example.com:8443/done?x=1", allow)
    assert check_url("http://127.0.0.1:9/x", allow)
    assert check_url("http://[::1]:9/x", allow)
    assert check_url("https://plain.example.com/x", allow)  # a bare host: its scheme's port
    assert check_url("http://plain.example.com:80/x", allow)
    for url, code in [
        ("https://evil.example.com/", "callback_not_allowed"),
        ("http://169.254.169.254/latest/meta-data", "callback_not_allowed"),
        ("http://hooks.example.com.evil.net/", "callback_not_allowed"),
        ("https://hooks.example.com/", "callback_not_allowed"),  # not its port
        ("https://plain.example.com:8443/", "callback_not_allowed"),  # a bare host: 443 only
        ("http://plain.example.com:443/", "callback_not_allowed"),  # http's default is 80
        ("http://[::1]:10/", "callback_not_allowed"),
        ("ftp://hooks.example.com/", "invalid_request"),
        ("https://user:pw@hooks.example.com:8443/", "invalid_request"),
        ("https://hooks.example.com:99999/", "invalid_request"),
        ("/relative", "invalid_request"),
    ]:
        with pytest.raises(InvalidRequest) as raised:
            check_url(url, allow)
        assert (raised.value.code, raised.value.param) == (code, "callback_url"), url
    with pytest.raises(InvalidRequest, match="without --callback-allow"):
        check_url("https://hooks.example.com/", ())


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:9/a\tb", "http://127.0.0.1:9/\r\nX-Injected: 1", "http://127.0.0.1:9/\x00",
     "http://127.0.0.1\x00.evil.net:9/", "http://127.0.0.1:9/\x7f", "http://127.0.0.1:9/\x85",
     "http://127.0.0.1:9/\x1b", " http://127.0.0.1:9/", "http://127.0.0.1:9/ ", "http://127.0.0.1:9/a b",
     "http://127.0.0.1:9/\u200b", "http://127.0.0.1:9/\u3000", "http://[127.0.0.1]/",
     "http://[127.0.0.1]:9/", "http://127.0.0.1:9\\@evil.net/", "http://[::1:9/",
     "http://127.0.0.1:9@evil.net/", "http://münchen.de/", "http:///x"],
)  # fmt: skip
def test_a_url_the_sender_could_read_differently_is_a_400(url: str) -> None:
    """Control characters and whitespace anywhere, bracketed IPv4, credentials in disguise, and
    whatever httpx and urllib read as different hosts or ports: refused before it is stored."""
    with pytest.raises(InvalidRequest) as raised:
        check_url(url, ("127.0.0.1:*", "evil.net:*", "münchen.de", "[::1]:*"))
    assert raised.value.status == 400 and raised.value.param == "callback_url", url
    assert raised.value.code == "invalid_request", url


def test_allow_list_entries_are_host_host_port_or_host_any_port() -> None:
    assert allowed_entry("Hooks.Example.com") == Allowed("hooks.example.com", None)
    assert allowed_entry("hooks.example.com:80") == Allowed("hooks.example.com", 80)
    assert allowed_entry("127.0.0.1:*") == Allowed("127.0.0.1", None, any_port=True)
    assert allowed_entry("[::1]:8080") == Allowed("::1", 8080)
    for bad in ("", "http://a.example", "a.example/x", "a.example:99999", "a.example:1:*",
                "u@a.example", "[127.0.0.1]", "a.example:x"):  # fmt: skip
        with pytest.raises(ValueError):
            allowed_entry(bad)
    with pytest.raises(SettingsError, match="--callback-allow"):
        Settings(engine="null", callback_allow=("a.example:x",), callback_secret="s")


@pytest.mark.parametrize(
    "secret",
    [None, 12345, "x" * 15, "x" * 257, "sixteen chars ok", "tab\tin-the-secret-here",
     "caf\u00e9-secret-value-here", "line\nbreak-secret-value"],
)  # fmt: skip
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
    when = job_schedule({"callback_url": "http://127.0.0.1/", "callback_secret": secret},
                        ("127.0.0.1",))  # fmt: skip
    assert when.callback_secret == secret and secret not in repr(when)
    assert when.fields()["callback_secret"] == secret  # counts in the Idempotency-Key digest
    with pytest.raises(InvalidRequest) as caught:
        job_schedule({"callback_secret": secret}, ("127.0.0.1",))
    assert caught.value.param == "callback_secret"


def test_the_signature_is_an_hmac_of_the_timestamp_and_the_body() -> None:
    body = b'{"id":"job_1","state":"completed"}'
    header = signature("s3cret", 1796104800, body)
    t, v1 = (part.split("=", 1)[1] for part in header.split(","))
    expected = hmac.new(b"s3cret", f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    assert t == "1796104800" and v1 == expected
    assert signature("other", 1796104800, body) != header


def job(job_id: str, seq: int, audio_s: float, not_before: float | None = None,
        deadline: float | None = None) -> Pending:  # fmt: skip
    return Pending(job_id, seq, not_before, deadline, audio_s)


def test_jobs_finish_in_deadline_order_then_submission_order() -> None:
    jobs = [job("late", 1, 10, deadline=500), job("none", 2, 10), job("early", 3, 10, deadline=100)]
    done = finishes(jobs, now=0, rate=2.0, ahead_s=4)  # 4 s of interactive audio first: 2 s
    assert done == {"early": 7.0, "late": 12.0, "none": 17.0}


def test_a_job_waits_for_its_not_before_and_takes_over_when_its_deadline_is_earlier() -> None:
    jobs = [job("bulk", 1, 100), job("news", 2, 10, not_before=20, deadline=40)]
    done = finishes(jobs, now=0, rate=1.0)
    assert done == {"news": 30.0, "bulk": 110.0}  # bulk pauses for news from 20 to 30
    assert finishes([job("later", 1, 5, not_before=50)], now=0, rate=1.0) == {"later": 55.0}


def test_a_deadline_is_at_risk_when_the_estimate_ends_after_it_or_it_passed() -> None:
    assert at_risk(100.0, 101.0, now=0) and not at_risk(100.0, 99.0, now=0)
    assert not at_risk(100.0, None, now=50) and at_risk(100.0, None, now=150)
    assert not at_risk(None, 1e9, now=0)


def test_an_items_audio_estimate_follows_its_text_speed_and_duration() -> None:
    short, long = item_audio_s("Hello there."), item_audio_s("Hello there. " * 20)
    assert 0 < short < long
    assert item_audio_s("Hello there. " * 20, speed=2.0) == pytest.approx(long / 2, rel=0.05)
    assert item_audio_s("anything", duration=7.5) == 7.5
