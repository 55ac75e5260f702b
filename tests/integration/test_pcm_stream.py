"""A raw `pcm` answer is played as it comes, so it starts with the short chunk an SSE answer
starts with; other formats keep the whole-file chunking. Against a live null-engine server
(`--chunk-s 2`, so the long text is several chunks)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator

import pytest

from tests.helpers.live_server import LiveServer, live
from tests.helpers.texts import LONG


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live(tmp_path_factory.mktemp("pcm"), "--chunk-s", "2") as running:
        yield running


def speak(server: LiveServer, **fields: object) -> tuple[bytes, dict[str, str]]:
    reply = server.request("POST", "/v1/audio/speech", json={"input": LONG, **fields})
    assert reply.status_code == 200, reply.text
    return reply.content, dict(reply.headers)


def sse_audio(body: bytes) -> bytes:
    events = [
        json.loads(line[6:]) for line in body.decode().splitlines() if line.startswith("data: ")
    ]
    return b"".join(
        base64.b64decode(e["audio"]) for e in events if e["type"] == "speech.audio.delta"
    )


def test_a_pcm_stream_has_the_chunks_of_an_sse_answer_and_shares_its_cache_entry(
    server: LiveServer,
) -> None:
    events, sse = speak(server, seed=5, response_format="pcm", stream_format="sse")
    assert sse["x-cache"] == "miss"
    pcm, stream = speak(server, seed=5, response_format="pcm")
    assert stream["x-chunks"] == sse["x-chunks"] and int(stream["x-chunks"]) > 1
    # The same chunks make the same bytes: the SSE answer's entry serves the pcm stream.
    assert stream["x-cache"] == "hit" and pcm == sse_audio(events)


def test_a_file_format_keeps_its_chunking_and_its_own_cache_entry(server: LiveServer) -> None:
    """(Which chunks each plan holds: tests/supervisor/http/routes/test_speech.py.)"""
    _, sse = speak(server, seed=6, response_format="mp3", stream_format="sse")
    _, mp3 = speak(server, seed=6, response_format="mp3")
    assert (sse["x-cache"], mp3["x-cache"]) == ("miss", "miss")  # not the SSE answer's audio
    _, wav = speak(server, seed=6, response_format="wav")
    assert mp3["x-chunks"] == wav["x-chunks"]
