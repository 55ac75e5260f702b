"""supervisor/http/stream/access.py: whose page a browser's handshake comes from."""

from __future__ import annotations

import pytest

from supervisor.http.stream.access import same_origin


@pytest.mark.parametrize(
    ("origin", "host"),
    [
        ("http://127.0.0.1:9194", "127.0.0.1:9194"),
        ("http://LOCALHOST:9194", "localhost:9194"),
        ("https://tts.example.com", "tts.example.com"),
        ("https://tts.example.com:443", "tts.example.com"),
        ("http://tts.example.com", "tts.example.com:80"),
    ],
)
def test_this_servers_own_page(origin: str, host: str) -> None:
    assert same_origin(origin, host)


@pytest.mark.parametrize(
    ("origin", "host"),
    [
        ("http://localhost:8080", "localhost:9194"),  # another port of the same host
        ("http://localhost", "localhost:9194"),
        ("http://127.0.0.1:9194", "localhost:9194"),  # another name: another origin
        ("https://evil.example", "localhost:9194"),
        ("null", "localhost:9194"),
        ("file://", "localhost:9194"),
        ("http://", ""),
    ],
)
def test_another_page(origin: str, host: str) -> None:
    assert not same_origin(origin, host)
