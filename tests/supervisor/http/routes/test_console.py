"""supervisor/http/routes/console.py: the console's page and assets, open, with a policy that
keeps the page to this server, and nothing else of the package served."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from supervisor.http.routes.console import CONSOLE_DIR, MEDIA_TYPES


@pytest.mark.parametrize("path", ["/", "/console"])
def test_the_page_needs_no_key_and_names_its_policy(client: TestClient, path: str) -> None:
    page = client.get(path, headers={"Authorization": ""})
    assert page.status_code == 200
    assert page.content == (CONSOLE_DIR / "index.html").read_bytes()
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert page.headers["x-content-type-options"] == "nosniff"


def test_each_asset_with_its_type(client: TestClient) -> None:
    for name, media_type in MEDIA_TYPES.items():
        if name == "index.html":
            continue
        asset = client.get(f"/console/{name}", headers={"Authorization": ""})
        assert asset.status_code == 200, name
        assert asset.headers["content-type"] == media_type
        assert asset.content == (CONSOLE_DIR / name).read_bytes()


@pytest.mark.parametrize("name", ["index.html", "nothing.js", "..%2Fapp.py", "%2e%2e"])
def test_nothing_else_is_an_asset(client: TestClient, name: str) -> None:
    missing = client.get(f"/console/{name}")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "not_found"
