"""supervisor/http/routes/cached.py: a reproducible request (one with a seed) answered again from
the result cache, byte for byte with its headers, as a file or as SSE; a request without a seed
is not cached, and one key's answer is not another's (the cache's store:
tests/supervisor/speech/stores/test_result_cache.py; over a live server: tests/integration/test_result_cache_api.py)."""

from __future__ import annotations

from httpx import Response
from starlette.testclient import TestClient

from supervisor.http.routes.cached import HEADER
from tests.helpers.app_client import KEY
from tests.helpers.waits import wait_until

APP_SETTINGS = {"api_keys": (KEY, "sk-other")}


def stored(client: TestClient) -> float:
    """The bytes the result cache holds."""
    lines = client.get("/metrics").text.splitlines()
    return sum(float(x.split()[-1]) for x in lines if x.startswith("omnivoice_result_cache_bytes "))


def speak_and_keep(client: TestClient, body: dict[str, object]) -> Response:
    """A first answer, once the cache has written it (after the answer, in a worker thread)."""
    before = stored(client)
    answer = client.post("/v1/audio/speech", json=body)
    wait_until(lambda: stored(client) > before, 30, "the answer to be stored")
    return answer


SEEDED = {"input": "Cached words.", "voice": "alloy", "response_format": "wav", "seed": 11}


def test_a_seeded_answer_is_replayed_whole_with_its_headers(client: TestClient) -> None:
    first = speak_and_keep(client, SEEDED)
    again = client.post("/v1/audio/speech", json=SEEDED)
    assert (first.headers[HEADER], again.headers[HEADER]) == ("miss", "hit")
    assert again.content == first.content
    for name in ("X-Seed", "X-Chunks", "X-Sample-Rate", "X-Omnivoice-QA", "content-type"):
        assert again.headers[name] == first.headers[name], name


def test_sse_is_cached_apart_and_replayed_as_events(client: TestClient) -> None:
    sse = {**SEEDED, "input": "Streamed words.", "stream_format": "sse"}
    first = speak_and_keep(client, sse)
    again = client.post("/v1/audio/speech", json=sse)
    assert (first.headers[HEADER], again.headers[HEADER]) == ("miss", "hit")
    assert again.headers["content-type"].startswith("text/event-stream")
    assert again.text == first.text
    as_file = client.post("/v1/audio/speech", json={**sse, "stream_format": "audio"})
    assert as_file.headers[HEADER] == "miss"  # the file's audio is its own


def test_no_seed_no_cache_and_each_key_its_own(client: TestClient) -> None:
    unseeded = {k: v for k, v in SEEDED.items() if k != "seed"}
    assert HEADER not in client.post("/v1/audio/speech", json=unseeded).headers
    mine = {**SEEDED, "input": "Whose words."}
    assert client.post("/v1/audio/speech", json=mine).headers[HEADER] == "miss"
    other = client.post("/v1/audio/speech", json=mine, headers={"Authorization": "Bearer sk-other"})
    assert other.headers[HEADER] == "miss"
