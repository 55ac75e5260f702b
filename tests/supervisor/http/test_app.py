"""supervisor/http/app.py: every error rendered in the OpenAI shape, and the middleware in its
order (the Host before the key, the key before the body's limit), on the real app in this
process (tests/helpers/app_client.py)."""

from __future__ import annotations

import asyncio
import errno
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.testclient import TestClient

from supervisor.database import StoreUnavailable
from supervisor.errors import Overloaded
from supervisor.http.app import open_database, render_error
from supervisor.settings import Settings
from tests.helpers.app_client import AUTH, app_client


def rendered(exc: Exception) -> tuple[int, dict[str, str], dict[str, object]]:
    request = Request({"type": "http", "method": "POST", "path": "/x", "headers": []})
    response = asyncio.run(render_error(request, exc))
    return response.status_code, dict(response.headers), json.loads(bytes(response.body))["error"]


def test_a_server_error_keeps_its_status_and_retry_after() -> None:
    status, headers, body = rendered(Overloaded("the queue is full", retry_after_s=2.5))
    assert status == 429 and headers["retry-after"] == "3"
    assert body["message"] == "the queue is full"


def test_starlettes_own_errors_are_in_the_openai_shape() -> None:
    status, _, body = rendered(HTTPException(405, "Method Not Allowed"))
    assert status == 405 and body == {
        "message": "Method Not Allowed",
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }


def test_a_full_disk_is_a_507_and_a_stopped_database_a_503() -> None:
    status, headers, _ = rendered(OSError(errno.ENOSPC, "No space left on device"))
    assert status == 507 and "retry-after" in headers
    status, headers, body = rendered(StoreUnavailable("connection refused"))
    assert (status, headers["retry-after"], body["code"]) == (503, "5", "job_store_unavailable")


def test_anything_else_is_a_500_that_tells_nothing_of_it() -> None:
    status, _, body = rendered(RuntimeError("secret internals"))
    assert status == 500 and body["message"] == "internal server error"
    assert "secret" not in json.dumps(body)


def test_no_database_without_a_postgresql_store(tmp_path: Path) -> None:
    assert open_database(Settings(engine="null", data_dir=str(tmp_path))) is None


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    with app_client(tmp_path_factory.mktemp("app"), max_input_chars=100) as started:
        yield started


def test_the_host_is_checked_before_the_key(client: TestClient) -> None:
    answer = client.get("/v1/models", headers={"Host": "evil.example"})
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "host_not_allowed"


def test_the_key_is_checked_before_the_bodys_limit(client: TestClient) -> None:
    huge = b"x" * (70 * 2**20)
    assert client.post("/v1/audio/speech", content=huge).status_code == 401
    as_json = {**AUTH, "Content-Type": "application/json"}
    answer = client.post("/v1/audio/speech", content=huge, headers=as_json)
    assert answer.status_code == 413 and answer.json()["error"]["type"] == "invalid_request_error"


def test_no_route_and_a_wrong_method_are_errors_in_the_openai_shape(client: TestClient) -> None:
    missing = client.get("/v1/nothing-here", headers=AUTH)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    wrong = client.delete("/v1/models", headers=AUTH)
    assert wrong.status_code == 405 and "error" in wrong.json()


def refused_count(client: TestClient) -> float:
    """401s counted so far (the metrics are the process's: other apps' too)."""
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in client.get("/metrics", headers=AUTH).text.splitlines()
        if line.startswith("omnivoice_http_requests_total") and 'status="401"' in line
    )


def test_refusals_are_counted_by_the_request_metrics(client: TestClient) -> None:
    before = refused_count(client)
    client.get("/v1/models")  # a 401, refused before any route
    assert refused_count(client) == before + 1
