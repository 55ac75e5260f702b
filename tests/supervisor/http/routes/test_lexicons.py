"""supervisor/http/routes/lexicons.py: a lexicon saved (201, then 200 replacing it), read, listed
and deleted, each key's own; a missing one is a 404 naming `name` (the lexicons' effect on speech:
tests/integration/test_text_api.py)."""

from __future__ import annotations

from starlette.testclient import TestClient

from tests.helpers.app_client import KEY

APP_SETTINGS = {"api_keys": (KEY, "sk-other")}
OTHER = {"Authorization": "Bearer sk-other"}


def test_saved_replaced_read_listed_and_deleted(client: TestClient) -> None:
    body = {"language": "en", "entries": {"SQL": "sequel"}}
    created = client.put("/v1/audio/lexicons/tech", json=body)
    assert created.status_code == 201, created.text
    replaced = client.put("/v1/audio/lexicons/tech", json={**body, "entries": {"GUI": "gooey"}})
    assert replaced.status_code == 200
    read = client.get("/v1/audio/lexicons/tech").json()
    assert read["entries"] == {"GUI": "gooey"}
    assert [x["name"] for x in client.get("/v1/audio/lexicons").json()["data"]] == ["tech"]
    deleted = client.delete("/v1/audio/lexicons/tech")
    assert deleted.json() == {"name": "tech", "object": "audio.lexicon.deleted", "deleted": True}
    assert client.get("/v1/audio/lexicons/tech").status_code == 404


def test_another_keys_lexicon_is_not_there(client: TestClient) -> None:
    client.put("/v1/audio/lexicons/mine", json={"language": "en", "entries": {"a": "b"}})
    assert client.get("/v1/audio/lexicons", headers=OTHER).json()["data"] == []
    for answer in (
        client.get("/v1/audio/lexicons/mine", headers=OTHER),
        client.delete("/v1/audio/lexicons/mine", headers=OTHER),
    ):
        assert answer.status_code == 404 and answer.json()["error"]["param"] == "name"
    assert client.get("/v1/audio/lexicons/mine").status_code == 200


def test_a_bad_body_is_a_400_or_415_naming_what(client: TestClient) -> None:
    missing = client.put("/v1/audio/lexicons/x", json={"entries": {"a": "b"}})
    assert missing.status_code == 400 and missing.json()["error"]["param"] == "language"
    not_json = client.put("/v1/audio/lexicons/x", content=b"language=en")
    assert not_json.status_code == 415 and not_json.json()["error"]["param"] == "Content-Type"
