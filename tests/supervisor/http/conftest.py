"""A `client` fixture: one app per test module, the real app in this process on the null engine
(tests/helpers/app_client.py), with the module's `APP_SETTINGS` if it has them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from tests.helpers.app_client import AUTH, app_client


@pytest.fixture(scope="module")
def client(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TestClient]:
    overrides = getattr(request.module, "APP_SETTINGS", {})
    with app_client(tmp_path_factory.mktemp("app"), **overrides) as started:
        started.headers.update(AUTH)
        yield started
