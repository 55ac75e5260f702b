"""supervisor/http/routes/jobs.py: a job created (202, Location, Idempotency-Key), its items
checked on the way in with errors located at the item, listed a page at a time, read, cancelled,
and its items' audio and captions served once done (the runner and its faults:
tests/supervisor/jobs; the jobs API over a live server: tests/integration/test_jobs_api.py)."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from supervisor.http.routes.jobs import MAX_KEY_CHARS, MAX_PAGE
from tests.helpers.waits import wait_until

APP_SETTINGS = {"max_job_items": 3}
ITEM = {"input": "A job's words.", "voice": "alloy", "response_format": "wav"}
LATER = "2999-01-01T00:00:00Z"  # a job that stays queued


def create(client: TestClient, body: dict[str, Any], key: str | None = None) -> dict[str, Any]:
    answer = client.post("/v1/jobs", json=body, headers={"Idempotency-Key": key} if key else {})
    assert answer.status_code == 202, answer.text
    assert answer.headers["Location"] == f"/v1/jobs/{answer.json()['id']}"
    job: dict[str, Any] = answer.json()
    return job


def refused(client: TestClient, body: object, **headers: str) -> tuple[int, str | None]:
    answer = client.post("/v1/jobs", json=body, headers=headers)
    return answer.status_code, answer.json()["error"]["param"]


def test_a_job_runs_and_its_items_audio_and_captions_are_served(client: TestClient) -> None:
    job = create(client, {"items": [{**ITEM, "id": "first", "captions": True}, ITEM]})
    done = wait_until(
        lambda: (got := client.get(f"/v1/jobs/{job['id']}").json())["state"] == "completed" and got,
        60,
        "the job to complete",
    )
    assert done["progress"]["done"] == 2
    audio = client.get(f"/v1/jobs/{job['id']}/items/0/audio")
    assert audio.content[:4] == b"RIFF"
    assert audio.headers["Content-Disposition"] == 'attachment; filename="first.wav"'
    assert (
        client.get(f"/v1/jobs/{job['id']}/items/1/audio").headers["Content-Disposition"]
        == 'attachment; filename="1.wav"'
    )
    captions = client.get(f"/v1/jobs/{job['id']}/items/0/captions.srt")
    assert captions.headers["content-type"].startswith("application/x-subrip")
    assert "A job's words." in captions.text
    none = client.get(f"/v1/jobs/{job['id']}/items/1/captions.vtt")
    assert none.status_code == 404 and none.json()["error"]["param"] == "n"


@pytest.mark.parametrize("n", ["2", "-1", "²", "1" * 30])
def test_an_item_that_is_not_there_is_a_404_naming_n(client: TestClient, n: str) -> None:
    job = create(client, {"items": [ITEM, ITEM], "not_before": LATER})
    missing = client.get(f"/v1/jobs/{job['id']}/items/{n}/audio")
    assert missing.status_code == 404 and missing.json()["error"]["param"] == "n"


def test_a_queued_items_audio_is_a_409_and_a_cancel_ends_the_job(client: TestClient) -> None:
    job = create(client, {"items": [ITEM], "not_before": LATER})
    early = client.get(f"/v1/jobs/{job['id']}/items/0/audio")
    assert early.status_code == 409 and early.json()["error"]["code"] == "item_not_done"
    cancelled = client.delete(f"/v1/jobs/{job['id']}")
    assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled"
    gone = client.get(f"/v1/jobs/{job['id']}/items/0/audio")
    assert "cancelled" in gone.json()["error"]["message"]


def test_no_such_job_is_a_404_on_every_route(client: TestClient) -> None:
    for method, path in [
        ("GET", "/v1/jobs/job_nope"),
        ("DELETE", "/v1/jobs/job_nope"),
        ("GET", "/v1/jobs/job_nope/items/0/audio"),
    ]:
        answer = client.request(method, path)
        assert answer.status_code == 404, path
        assert answer.json()["error"]["code"] == "job_not_found"


def test_the_same_idempotency_key_is_the_same_job(client: TestClient) -> None:
    body = {"items": [ITEM], "not_before": LATER}
    first = create(client, body, key="once")
    again = client.post("/v1/jobs", json=body, headers={"Idempotency-Key": "once"})
    assert again.json()["id"] == first["id"] and again.headers["Idempotent-Replayed"] == "true"
    too_long = refused(client, body, **{"Idempotency-Key": "k" * (MAX_KEY_CHARS + 1)})
    assert too_long == (400, "Idempotency-Key")


def test_items_are_checked_on_the_way_in_and_errors_name_the_item(client: TestClient) -> None:
    assert refused(client, [ITEM]) == (400, None)
    assert refused(client, {"items": []}) == (400, "items")
    assert refused(client, {"items": [ITEM] * 4}) == (400, "items")  # --max-job-items 3
    assert refused(client, {"items": [ITEM, {**ITEM, "voice": ""}]})[1] == "items[1].voice"
    assert refused(client, {"items": [{**ITEM, "stream_format": "sse"}]}) == (
        400,
        "items[0].stream_format",
    )
    twice = {"items": [{**ITEM, "id": "a"}, {**ITEM, "id": "a"}]}
    assert refused(client, twice) == (400, "items[1].id")
    assert refused(client, {"items": [{**ITEM, "id": "../etc"}]}) == (400, "items[0].id")
    assert refused(client, {"items": [ITEM, "text"]}) == (400, "items[1]")


def test_jobs_are_listed_a_page_at_a_time(client: TestClient) -> None:
    for _ in range(3):
        create(client, {"items": [ITEM], "not_before": LATER})
    page = client.get("/v1/jobs?limit=2").json()
    assert len(page["data"]) == 2 and page["has_more"] is True
    assert page["first_id"] == page["data"][0]["id"] and page["last_id"] == page["data"][1]["id"]
    after = client.get(f"/v1/jobs?limit=2&after={page['last_id']}").json()
    assert not {j["id"] for j in after["data"]} & {j["id"] for j in page["data"]}
    for limit in ("0", str(MAX_PAGE + 1), "two"):
        answer = client.get(f"/v1/jobs?limit={limit}")
        assert answer.status_code == 400 and answer.json()["error"]["param"] == "limit"
