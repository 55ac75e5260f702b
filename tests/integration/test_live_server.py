"""The tests' own harness: `live()` survives losing its port between picking it and binding it
(the servers of tests running at the same time pick ports the same way)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import live_server
from tests.helpers.live_server import free_port, live


def test_a_server_whose_port_was_taken_meanwhile_starts_again_on_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        lost = int(taken.getsockname()[1])
        ports: Iterator[int] = iter([lost, free_port()])
        monkeypatch.setattr(live_server, "free_port", lambda: next(ports))
        with live(tmp_path) as server:
            assert not server.url.endswith(f":{lost}")
            assert server.request("GET", "/health").json()["status"] == "ok"
        first = (tmp_path / f"server-{lost}.log").read_text()
        assert f"port {lost} is in use on 127.0.0.1" in first
