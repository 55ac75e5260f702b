"""The server's Starlette app in this process, behind Starlette's TestClient, for the unit tests of
supervisor/http: the real routes, middleware and lifespan, with one real null-engine sidecar
(a process of its own), so a route's own answers are tested without starting `serve`."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from supervisor.http.app import create_app
from supervisor.supervision.gpu import CPU
from tests.helpers.harness import SPAWN_S, fast_settings
from tests.helpers.live_server import AUTH, KEY
from tests.helpers.waits import wait_until

__all__ = ["AUTH", "KEY", "WS_HEADERS", "app_client"]

# A WebSocket handshake: TestClient names the Host "testserver" there, which the server refuses.
WS_HEADERS = {**AUTH, "Host": "localhost"}


@contextlib.contextmanager
def app_client(data_dir: Path, **overrides: Any) -> Iterator[TestClient]:
    """A started app (its sidecar ready) on the null engine, with the key KEY, answering as
    http://localhost; `overrides` are settings."""
    values: dict[str, Any] = {"data_dir": str(data_dir), "api_keys": (KEY,), **overrides}
    app = create_app(fast_settings(None, **values), devices=[CPU])
    with TestClient(app, base_url="http://localhost", raise_server_exceptions=False) as client:
        wait_until(lambda: client.get("/ready").status_code == 200, SPAWN_S, "the sidecar")
        yield client
