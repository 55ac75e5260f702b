"""supervisor/http/routes/speech.py, its answers: `/v1/audio/speech`'s own contract (a JSON body or a 415,
a whole file or SSE events), its request deadline and its watch for a client gone (the speech
fields themselves: tests/supervisor/speech; the whole API: tests/integration/test_api.py)."""

from __future__ import annotations

import asyncio
import base64
import json

import pytest
from starlette.requests import Request
from starlette.testclient import TestClient
from starlette.types import Message

from supervisor.errors import RequestTimeout
from supervisor.http.routes.speech import ClientGone, Deadline, until_disconnected

SPEECH = {"input": "Hello there.", "voice": "alloy"}


def test_a_whole_file_with_its_headers(client: TestClient) -> None:
    answer = client.post("/v1/audio/speech", json={**SPEECH, "response_format": "wav", "seed": 7})
    assert answer.status_code == 200
    assert answer.content[:4] == b"RIFF" and answer.headers["content-type"] == "audio/wav"
    assert answer.headers["X-Seed"] == "7" and answer.headers["X-Sample-Rate"] == "24000"


def test_sse_is_audio_deltas_then_one_done_event(client: TestClient) -> None:
    answer = client.post(
        "/v1/audio/speech", json={**SPEECH, "stream_format": "sse", "response_format": "pcm"}
    )
    assert answer.headers["content-type"].startswith("text/event-stream")
    events = [
        json.loads(line[6:]) for line in answer.text.splitlines() if line.startswith("data: ")
    ]
    assert [e["type"] for e in events[:-1]] == ["speech.audio.delta"] * (len(events) - 1)
    assert events[-1]["type"] == "speech.audio.done" and events[-1]["usage"]["input_tokens"] > 0
    pcm = b"".join(base64.b64decode(e["audio"]) for e in events[:-1])
    assert len(pcm) > 0 and len(pcm) % 2 == 0


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded"])
def test_a_body_that_is_not_json_is_a_415(client: TestClient, content_type: str | None) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    answer = client.post("/v1/audio/speech", content=json.dumps(SPEECH), headers=headers)
    assert answer.status_code == 415 and answer.json()["error"]["param"] == "Content-Type"


@pytest.mark.parametrize("raw", [b"{not json", b'{"input": "\\ud800"}', b"\xff\xfe"])
def test_json_that_cannot_be_read_is_a_400(client: TestClient, raw: bytes) -> None:
    answer = client.post(
        "/v1/audio/speech", content=raw, headers={"Content-Type": "application/json"}
    )
    assert answer.status_code == 400, answer.text


def test_a_deadline_cancels_what_it_waits_for() -> None:
    async def scenario() -> None:
        slow = asyncio.ensure_future(asyncio.sleep(30))  # the work that outlives its deadline
        with pytest.raises(RequestTimeout) as late:
            await Deadline(0.05)(slow)
        assert "0.05 s" in late.value.message
        assert slow.cancelled()
        assert await Deadline(None)(asyncio.sleep(0, "unbounded")) == "unbounded"

    asyncio.run(scenario())


def test_a_client_gone_cancels_the_work() -> None:
    async def scenario() -> None:
        async def receive() -> Message:
            return {"type": "http.disconnect"}

        request = Request({"type": "http", "method": "POST", "path": "/", "headers": []}, receive)
        work = asyncio.ensure_future(asyncio.Event().wait())  # never done by itself
        with pytest.raises(ClientGone):
            await until_disconnected(request, work)
        await asyncio.sleep(0)  # the cancellation is delivered on the next turn of the loop
        assert work.cancelled()

    asyncio.run(scenario())
