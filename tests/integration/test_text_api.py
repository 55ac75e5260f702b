"""Long-form text features over HTTP, against a live server on the tiny checkpoint: SSML
breaks as real silence in the returned samples, voices named in the text, and the 400s."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from live_server import KEY, LiveServer, live

RATE = 24000


@pytest.fixture(scope="module")
def server(checkpoint_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OMP_NUM_THREADS", "1")
        with live(tmp_path_factory.mktemp("text"), checkpoint=checkpoint_dir) as running:
            yield running


def speech(server: LiveServer, **fields: Any) -> httpx.Response:
    body = {"response_format": "pcm", "seed": 5, **fields}
    return httpx.post(server.url + "/v1/audio/speech", json=body, headers={"Authorization": f"Bearer {KEY}"}, timeout=300)


def longest_silence_s(pcm: bytes) -> float:
    """The longest run of exactly zero samples, in seconds."""
    samples = np.frombuffer(pcm, dtype="<i2")
    edges = np.diff(np.concatenate(([0], (samples == 0).astype(np.int8), [0])))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    return float((ends - starts).max(initial=0)) / RATE


def test_a_break_is_that_much_silence_in_the_audio(server: LiveServer) -> None:
    plain = speech(server, input="<speak>One two three. Four five six.</speak>")
    broken = speech(server, input='<speak>One two three.<break time="1500ms"/>Four five six.</speak>')
    assert plain.status_code == broken.status_code == 200
    assert broken.headers["X-Chunks"] == "2"
    assert longest_silence_s(plain.content) < 1.5 <= longest_silence_s(broken.content)


def test_voices_named_in_the_text_are_used_and_unknown_ones_refused(server: LiveServer) -> None:
    answer = speech(server, input='<speak>Hello. <voice name="alloy">Hi there.</voice></speak>')
    assert answer.status_code == 200 and answer.headers["X-Chunks"] == "2" and len(answer.content) > 0
    refused = speech(server, input='<speak>Hello. <voice name="nobody">Hi.</voice></speak>')
    error = refused.json()["error"]
    assert refused.status_code == 400 and error["param"] == "input" and "'nobody' not found" in error["message"]


def test_bad_markup_is_a_400_naming_the_element(server: LiveServer) -> None:
    refused = speech(server, input="<speak>Hello <audio src='x.wav'/></speak>")
    assert refused.status_code == 400
    assert refused.json()["error"] == {
        "message": "SSML: element <audio> is not supported; use <speak>, <break>, <sub>, <say-as>, <prosody>, "
                   "<voice>, <lang>", "type": "invalid_request_error", "param": "input", "code": "invalid_ssml"}  # fmt: skip


def test_lexicons_are_saved_listed_used_and_deleted(server: LiveServer) -> None:
    auth = {"Authorization": f"Bearer {KEY}"}
    url = server.url + "/v1/audio/lexicons"
    body = {"language": "en", "entries": {"SQL": "sequel"}}
    created = httpx.put(url + "/brands", json=body, headers=auth)
    assert created.status_code == 201 and created.json()["entries"] == {"SQL": "sequel"}
    assert httpx.put(url + "/brands", json=body, headers=auth).status_code == 200  # replaced
    assert [x["name"] for x in httpx.get(url, headers=auth).json()["data"]] == ["brands"]
    assert httpx.get(url + "/brands", headers=auth).json()["language"] == "en"
    assert speech(server, input="SQL rocks.", lexicon="brands").status_code == 200
    jobs = httpx.post(server.url + "/v1/jobs", json={"items": [{"input": "x", "lexicon": "nope"}]}, headers=auth)
    assert jobs.status_code == 400 and jobs.json()["error"]["code"] == "lexicon_not_found"
    assert httpx.delete(url + "/brands", headers=auth).json()["deleted"] is True
    refused = speech(server, input="SQL rocks.", lexicon="brands")
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "lexicon"
    assert httpx.get(url + "/brands", headers=auth).status_code == 404
    huge = {"language": "en", "entries": {f"w{i}": "x" * 190 for i in range(30_000)}}
    assert httpx.put(url + "/huge", json=huge, headers=auth).status_code == 413
