"""supervisor/http/header_checks.py: the headers the server reads are UTF-8, and those it reads
as one value come once. Headers it never reads pass whatever they hold."""

from __future__ import annotations

from starlette.types import Scope

from supervisor.errors import InvalidRequest
from supervisor.http.header_checks import header_error


def scope(*headers: tuple[bytes, bytes]) -> Scope:
    return {"type": "http", "headers": list(headers)}


def test_headers_read_once_and_valid_pass() -> None:
    assert header_error(scope()) is None
    assert (
        header_error(
            scope(
                (b"host", b"localhost"),
                (b"idempotency-key", "clé-1".encode()),
                (b"content-type", b"application/json"),
                (b"accept", b"*/*"),
                (b"accept", b"audio/wav"),  # not read: may come twice
                (b"origin", b"http://localhost"),
                (b"origin", b"http://localhost"),  # read, but not as one value
            )
        )
        is None
    )


def test_a_read_header_that_is_not_utf8_is_a_400_naming_it() -> None:
    error = header_error(scope((b"host", b"localhost"), (b"idempotency-key", b"\xff\xfe")))
    assert isinstance(error, InvalidRequest)
    assert (error.status, error.code, error.param) == (400, "invalid_text", "Idempotency-Key")
    assert "UTF-8" in error.message


def test_a_header_not_read_may_hold_any_bytes() -> None:
    assert header_error(scope((b"x-trace", b"\xff"), (b"user-agent", b"\xc3("))) is None


def test_a_header_read_as_one_value_sent_twice_is_a_400() -> None:
    for name, shown in ((b"idempotency-key", "Idempotency-Key"), (b"content-type", "Content-Type")):
        error = header_error(scope((name, b"a"), (b"accept", b"*/*"), (name, b"a")))
        assert isinstance(error, InvalidRequest), name
        assert (error.status, error.param) == (400, shown)
        assert error.code != "invalid_text"


def test_the_first_fault_is_the_one_named() -> None:
    error = header_error(
        scope((b"content-type", b"\xff"), (b"idempotency-key", b"a"), (b"idempotency-key", b"b"))
    )
    assert error is not None and error.param == "Content-Type"
