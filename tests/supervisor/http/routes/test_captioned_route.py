"""supervisor/http/routes/captioned.py: one JSON document, the audio in base64 and each
sentence's timing, one after the other within the audio; SSE and word timing without an ASR
sidecar are 400s naming their field (captions read back by real parsers:
tests/integration/test_delivery_api.py)."""

from __future__ import annotations

import base64
import io
import wave

from starlette.testclient import TestClient


def test_the_audio_and_each_sentences_timing(client: TestClient) -> None:
    answer = client.post(
        "/v1/audio/speech/captioned",
        json={
            "input": "Hello there. Goodbye now.",
            "voice": "alloy",
            "response_format": "wav",
            "seed": 1,
        },
    )
    assert answer.status_code == 200, answer.text
    assert answer.headers["X-Seed"] == "1"
    body = answer.json()
    assert (body["format"], body["sample_rate"]) == ("wav", 24000)
    with wave.open(io.BytesIO(base64.b64decode(body["audio"]))) as audio:
        seconds = audio.getnframes() / audio.getframerate()
    segments = body["segments"]
    assert [s["text"] for s in segments] == ["Hello there.", "Goodbye now."]
    assert segments[0]["start"] == 0.0
    assert segments[0]["end"] <= segments[1]["start"] < segments[1]["end"]
    assert abs(segments[-1]["end"] - seconds) < 0.05


def test_sse_and_words_without_asr_are_400s(client: TestClient) -> None:
    sse = client.post("/v1/audio/speech/captioned", json={"input": "Hi.", "stream_format": "sse"})
    assert sse.status_code == 400 and sse.json()["error"]["param"] == "stream_format"
    words = client.post(
        "/v1/audio/speech/captioned", json={"input": "Hi.", "timestamp_granularities": ["word"]}
    )
    assert words.status_code == 400
    assert words.json()["error"]["code"] == "word_timestamps_unavailable"


def test_a_field_of_no_speech_request_is_a_400(client: TestClient) -> None:
    odd = client.post("/v1/audio/speech/captioned", json={"input": "Hi.", "captions": True})
    assert odd.status_code == 400 and odd.json()["error"]["param"] == "captions"
