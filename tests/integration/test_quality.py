"""Quality checks and retries end to end: a real server, a real sidecar on the tiny checkpoint,
and output faults (sidecar/devtools/faults.py) that spoil chosen items' audio for their first N attempts
or for good. Each spoiled item is retried and passes, or ends failed with its `qa` reason; a
speech answer says which in X-OmniVoice-QA; nothing bad is reported as good."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers.job_helpers import decoded_seconds, ended, submit, wait_job
from tests.helpers.live_server import AUTH, LiveServer, live
from tests.helpers.waits import wait_until

TEXT = "Please stand clear of the closing doors."  # 7 words, about 2.6 s on the tiny checkpoint
# Which checks each fault makes fail, when it hits every attempt.
CAUGHT_BY = {
    "nan": {"finite"},
    "silence": {"rms", "leading_silence", "trailing_silence"},
    "runaway": {"internal_silence"},
    "length": {"speech_rate"},
}


@pytest.fixture(scope="module")
def server(checkpoint_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    flags = ("--max-batch-size", "4", "--chunk-s", "2")  # qa-retries: default 2
    with live(
        tmp_path_factory.mktemp("quality"), *flags, checkpoint=checkpoint_dir, faults=True
    ) as running:
        yield running


def qa_metrics(server: LiveServer) -> dict[str, float]:
    text = server.request("GET", "/metrics").text
    found = re.findall(r'^(omnivoice_qa_\w+?_total(?:\{check="\w+"\})?) (\S+)$', text, re.M)
    return {name: float(value) for name, value in found}


def test_spoiled_items_are_retried_into_passing_or_fail_with_their_reason(
    server: LiveServer,
) -> None:
    before = qa_metrics(server)
    items: list[dict[str, Any]] = [{"id": "clean", "input": TEXT, "response_format": "wav"}]
    for fault in CAUGHT_BY:
        items.append(
            {
                "id": f"{fault}-twice",
                "input": f"{TEXT} [[fault:{fault}:2]]",
                "response_format": "wav",
            }
        )
        items.append(
            {
                "id": f"{fault}-always",
                "input": f"{TEXT} [[fault:{fault}]]",
                "response_format": "wav",
            }
        )
    created = submit(server, items)
    final = wait_job(server, created["id"], ended, 180, "the job to end")
    by_id = {item["id"]: item for item in final["items"]}
    clean = by_id["clean"]
    assert clean["state"] == "done" and clean["qa"]["passed"] and clean["qa"]["attempts"] == 1
    assert set(clean["qa"]["checks"]) == {
        "finite",
        "clipping",
        "rms",
        "leading_silence",
        "trailing_silence",
        "internal_silence",
        "speech_rate",
    }
    for fault, checks in CAUGHT_BY.items():
        retried = by_id[f"{fault}-twice"]
        assert retried["state"] == "done", retried
        assert retried["qa"]["passed"] and retried["qa"]["attempts"] == 3, retried["qa"]
        assert all(check["passed"] for check in retried["qa"]["checks"].values())
        audio = server.request("GET", retried["audio_url"])
        # The third attempt's clean audio, not a spoiled one (silence, a tail, six times over).
        assert decoded_seconds(audio.content, "wav") == pytest.approx(
            clean["audio_seconds"], abs=0.5
        )
        failed = by_id[f"{fault}-always"]
        assert failed["state"] == "failed" and failed["audio_url"] is None, failed
        assert (
            failed["error"]["code"] == "qa_failed"
            and "after 3 attempt" in failed["error"]["message"]
        )
        qa = failed["qa"]
        assert not qa["passed"] and qa["attempts"] == 3
        assert {name for name, c in qa["checks"].items() if not c["passed"]} == checks, qa
        assert all(name in failed["error"]["message"] for name in checks)
        assert (
            server.request(
                "GET", f"/v1/jobs/{created['id']}/items/{failed['index']}/audio"
            ).status_code
            == 409
        )
    after = qa_metrics(server)
    # Each of 8 spoiled items was retried twice; the 4 that never pass failed their last attempt.
    assert after["omnivoice_qa_retries_total"] - before.get("omnivoice_qa_retries_total", 0) == 16
    assert after["omnivoice_qa_failed_total"] - before.get("omnivoice_qa_failed_total", 0) == 4
    label = 'omnivoice_qa_check_failures_total{check="finite"}'
    assert after[label] - before.get(label, 0) == 5  # nan: 2 attempts retried, 3 failing for good


def test_a_speech_answer_says_whether_its_audio_passed(server: LiveServer) -> None:
    body = {"input": TEXT, "response_format": "wav", "seed": 3}
    good = server.request("POST", "/v1/audio/speech", json=body)
    assert good.status_code == 200 and good.headers["X-OmniVoice-QA"] == "passed; attempts=1"
    retried = server.request(
        "POST", "/v1/audio/speech", json={**body, "input": f"{TEXT} [[fault:runaway:1]]"}
    )
    assert retried.status_code == 200
    assert retried.headers["X-OmniVoice-QA"] == "passed; attempts=2"
    assert retried.headers["X-Seed"] == "3"  # retry seeds derive from it: it repeats the answer
    bad = server.request(
        "POST", "/v1/audio/speech", json={**body, "input": f"{TEXT} [[fault:silence]]"}
    )
    assert bad.status_code == 200 and bad.headers["X-OmniVoice-QA"] == "failed; attempts=3"
    captioned = server.request(
        "POST",
        "/v1/audio/speech/captioned",
        json={**body, "input": TEXT.replace(" of", " [[fault:nan:1]] of")},
    )
    assert captioned.status_code == 200, captioned.text
    assert captioned.headers["X-OmniVoice-QA"] == "passed; attempts=2"


def test_a_stream_that_said_passed_ends_in_an_error_when_a_later_chunk_fails(
    server: LiveServer,
) -> None:
    sentences = [
        "The museum will close in fifteen minutes.",
        "Chapter one. It was a bright cold day in April.",
        "The boats rocked gently in the grey water. [[fault:nan]]",
    ]
    body = {"input": " ".join(sentences), "response_format": "pcm", "stream_format": "sse"}
    url = server.url + "/v1/audio/speech"
    with httpx.stream("POST", url, json=body, headers=AUTH, timeout=120) as reply:
        assert reply.status_code == 200
        assert reply.headers["X-Chunks"] != "1"
        assert reply.headers["X-OmniVoice-QA"] == "passed; attempts=1"
        events = [json.loads(line[6:]) for line in reply.iter_lines() if line.startswith("data: ")]
    assert events[0]["type"] == "speech.audio.delta"
    assert events[-1]["type"] == "error", events[-1]
    assert events[-1]["error"]["code"] == "qa_failed" and "finite" in events[-1]["error"]["message"]
    assert not any(e["type"] == "speech.audio.done" for e in events)


def test_an_audio_stream_whose_later_chunk_fails_is_cut_with_one_line_logged(
    server: LiveServer,
) -> None:
    """The connection is cut (a stream that ends normally never holds failing audio), and the
    log says so in one line, not as a crash with two tracebacks (issue 48, low)."""
    sentences = [
        "The museum will close in ten minutes.",
        "Chapter two. It was a bright cold day in May.",
        "The boats rocked gently in the green water. [[fault:nan]]",
    ]
    body = {"input": " ".join(sentences), "response_format": "pcm", "stream_format": "audio"}
    logged = len(server.log.read_text())
    with (
        pytest.raises(httpx.RemoteProtocolError),
        httpx.stream(
            "POST", server.url + "/v1/audio/speech", json=body, headers=AUTH, timeout=120
        ) as reply,
    ):
        assert reply.status_code == 200 and reply.headers["X-OmniVoice-QA"].startswith("passed")
        for _ in reply.iter_bytes():
            pass
    wait_until(lambda: "stream cut" in server.log.read_text()[logged:], 30, "the cut logged")
    new = server.log.read_text()[logged:]
    assert "Traceback" not in new and "without completing response" not in new, new
    cut = [line for line in new.splitlines() if "stream cut" in line]
    assert len(cut) == 1 and "qa_failed" in cut[0] and "finite" in cut[0], new


def test_thresholds_and_retries_are_settings(
    checkpoint_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    flags = ("--qa-retries", "0", "--qa-thresholds", "max_internal_silence_s=3")
    with live(
        tmp_path_factory.mktemp("qa-settings"), *flags, checkpoint=checkpoint_dir, faults=True
    ) as server:
        body = {"input": f"{TEXT} [[fault:runaway]]", "response_format": "wav"}
        tail = server.request("POST", "/v1/audio/speech", json=body)
        assert tail.headers["X-OmniVoice-QA"] == "passed; attempts=1"  # 2.5 s is under 3 s now
        body["input"] = f"{TEXT} [[fault:silence]]"
        silent = server.request("POST", "/v1/audio/speech", json=body)
        assert silent.headers["X-OmniVoice-QA"] == "failed; attempts=1"  # no retry
