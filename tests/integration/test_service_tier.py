"""OpenAI's `service_tier` against a live null-engine server: a bad value is a 400 (an `error`
message on the WebSocket) naming it on every surface, and a `flex` request waits behind
interactive ones on a busy sidecar (the order of the answers, not timers)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from websockets.sync.client import connect

from tests.helpers.job_helpers import ended, submit, wait_job
from tests.helpers.live_server import AUTH, LiveServer, live

BAD = ["scale", "Flex", 1, True, ["flex"], {"tier": "flex"}]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    # One task a batch, so the queue's order is the order the sidecar is sent work in; batches
    # in turn (no light joins), so two slow ones fill the sidecar and the rest wait in the queue.
    flags = ("--max-batch-size", "1", "--no-light-joins")
    with live(tmp_path_factory.mktemp("tiers"), *flags, faults=True) as running:
        yield running


def refused(reply: httpx.Response, param: str = "service_tier") -> None:
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["param"] == param and error["type"] == "invalid_request_error", error


@pytest.mark.parametrize("value", BAD, ids=repr)
def test_a_bad_service_tier_is_a_400_on_every_route(server: LiveServer, value: Any) -> None:
    body = {"input": "Hello there.", "service_tier": value}
    refused(server.request("POST", "/v1/audio/speech", json=body))
    refused(server.request("POST", "/v1/audio/speech/captioned", json=body))
    refused(server.request("POST", "/v1/jobs", json={"items": [body]}), "items[0].service_tier")


def test_a_bad_service_tier_is_an_error_message_on_the_websocket(server: LiveServer) -> None:
    url = server.url.replace("http://", "ws://") + "/v1/audio/speech/stream"
    with connect(url, additional_headers=AUTH, open_timeout=30) as ws:
        for value in BAD:
            ws.send(json.dumps({"type": "session.config", "service_tier": value}))
            error = json.loads(ws.recv(timeout=60))
            assert error["type"] == "error" and error["param"] == "service_tier", error
        ws.send(json.dumps({"type": "session.config", "service_tier": "flex"}))
        ws.send(json.dumps({"type": "input.text", "text": "Taken at the bulk tier."}))
        ws.send(json.dumps({"type": "input.done"}))
        kinds = []
        while not kinds or kinds[-1] != "session.done":
            got = ws.recv(timeout=60)
            if isinstance(got, str):
                kinds.append(json.loads(got)["type"])
        assert "error" not in kinds and "audio.done" in kinds


def test_every_tier_is_accepted_and_a_job_item_may_name_one(server: LiveServer) -> None:
    for value in ("auto", "default", "priority", "flex", None):
        body = {"input": "Hello there.", "response_format": "wav", "service_tier": value}
        assert server.request("POST", "/v1/audio/speech", json=body).status_code == 200
    job = submit(server, [{"input": "An item."}, {"input": "Now.", "service_tier": "priority"}])
    done = wait_job(server, job["id"], ended, 60, "the job to end")
    assert done["state"] == "completed", done


def test_a_flex_request_is_answered_after_interactive_ones_sent_after_it(
    server: LiveServer,
) -> None:
    """Two slow batches fill the sidecar (one denoising, one in its pipe), so what comes next
    waits in the scheduler's queue: a `flex` request, then two interactive ones. The flex one
    is sent last, so it is answered last; it takes a while itself (`slow`), so the order of
    the answers cannot come from the race of their last milliseconds."""
    answered: list[str] = []
    lock = threading.Lock()

    def speak(name: str, text: str, tier: str = "auto") -> threading.Thread:
        body = {"input": text, "response_format": "wav", "service_tier": tier}

        def run() -> None:
            reply = server.request("POST", "/v1/audio/speech", json=body)
            with lock:
                answered.append(name if reply.status_code == 200 else f"{name}: {reply.text}")

        thread = threading.Thread(target=run)
        thread.start()
        return thread

    def queued(count: int) -> None:
        server.wait_for(lambda h: h["queue"]["queued"] == count, 30, f"{count} queued")

    threads = [speak(f"busy{i}", f"Busy number {i}. [[fault:slow:2]]") for i in range(2)]
    server.wait_for(lambda h: h["queue"]["tasks"] == 2, 30, "the busy batches")
    queued(0)  # both sent: the sidecar holds two batches waiting for its device
    threads.append(speak("flex", "Whenever you can. [[fault:slow:1]]", "flex"))
    queued(1)
    threads.append(speak("priority", "Right now, please.", "priority"))
    queued(2)
    threads.append(speak("auto", "Me too, please."))
    queued(3)
    health = server.health()["queue"]["waiting_audio_s"]
    assert health["bulk"] > 0 and health["interactive"] > 0
    for thread in threads:
        thread.join(120)
    assert answered.index("flex") > max(answered.index("priority"), answered.index("auto"))
    assert sorted(answered) == ["auto", "busy0", "busy1", "flex", "priority"], answered
