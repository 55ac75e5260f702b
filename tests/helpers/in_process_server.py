"""A real server in the test's own process: the app under uvicorn in a thread, on a free port,
with its real sidecar (null engine by default). For what only the process itself can show, such
as the spans an in-memory exporter holds (tests/integration/test_tracing.py); API tests use
`live_server`, a process of its own.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from supervisor.http.app import create_app
from tests.helpers.harness import SPAWN_S, fast_settings
from tests.helpers.ports import free_port
from tests.helpers.waits import wait_until


@contextlib.contextmanager
def in_process(data_dir: Path, **overrides: Any) -> Iterator[str]:
    """The server's URL once it is ready; stopped (its sidecar with it) on the way out."""
    port = free_port()
    settings = fast_settings(None, port=port, data_dir=str(data_dir), **overrides)
    config = uvicorn.Config(
        create_app(settings), host="127.0.0.1", port=port, log_config=None, lifespan="on"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="in-process-server", daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: not thread.is_alive() or ready(url), SPAWN_S, "the server to be ready")
        assert thread.is_alive(), "the server stopped while starting"
        yield url
    finally:
        server.should_exit = True
        thread.join(SPAWN_S)
        assert not thread.is_alive(), "the server did not stop"


def ready(url: str) -> bool:
    try:
        return httpx.get(url + "/ready", timeout=5).status_code == 200
    except httpx.TransportError:
        return False
