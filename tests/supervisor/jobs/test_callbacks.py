"""supervisor/jobs/callbacks.py: where a callback may go (the allow-list, URLs the sender could read
differently) and how it is signed."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from supervisor.errors import InvalidRequest
from supervisor.jobs.callbacks import check_url, signature


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
    [
        "http://127.0.0.1:9/a\tb",
        "http://127.0.0.1:9/\r\nX-Injected: 1",
        "http://127.0.0.1:9/\x00",
        "http://127.0.0.1\x00.evil.net:9/",
        "http://127.0.0.1:9/\x7f",
        "http://127.0.0.1:9/\x85",
        "http://127.0.0.1:9/\x1b",
        " http://127.0.0.1:9/",
        "http://127.0.0.1:9/ ",
        "http://127.0.0.1:9/a b",
        "http://127.0.0.1:9/\u200b",
        "http://127.0.0.1:9/\u3000",
        "http://[127.0.0.1]/",
        "http://[127.0.0.1]:9/",
        "http://127.0.0.1:9\\@evil.net/",
        "http://[::1:9/",
        "http://127.0.0.1:9@evil.net/",
        "http://münchen.de/",
        "http:///x",
    ],
)
def test_a_url_the_sender_could_read_differently_is_a_400(url: str) -> None:
    """Control characters and whitespace anywhere, bracketed IPv4, credentials in disguise, and
    whatever httpx and urllib read as different hosts or ports: refused before it is stored."""
    with pytest.raises(InvalidRequest) as raised:
        check_url(url, ("127.0.0.1:*", "evil.net:*", "münchen.de", "[::1]:*"))
    assert raised.value.status == 400 and raised.value.param == "callback_url", url
    assert raised.value.code == "invalid_request", url


def test_the_signature_is_an_hmac_of_the_timestamp_and_the_body() -> None:
    body = b'{"id":"job_1","state":"completed"}'
    header = signature("s3cret", 1796104800, body)
    t, v1 = (part.split("=", 1)[1] for part in header.split(","))
    expected = hmac.new(b"s3cret", f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    assert t == "1796104800" and v1 == expected
    assert signature("other", 1796104800, body) != header
