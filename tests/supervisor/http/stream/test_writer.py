"""supervisor/http/stream/writer.py: each segment's audio.start, its audio and audio.done in order,
session.done after each utterance's last; with `stream_audio` false, a segment's audio held and
sent as one frame; total_bytes what was sent."""

from __future__ import annotations

from typing import Any

from starlette.testclient import TestClient

from tests.helpers.app_client import WS_HEADERS
from tests.helpers.ws_session import PATH, kinds, received

LONG = "This is one long sentence that goes on and on without any end in sight for a while"
CONFIG = {"type": "session.config", "voice": "alloy", "response_format": "pcm"}


def utterances(client: TestClient, config: dict[str, Any], *texts: str) -> list[Any]:
    with client.websocket_connect(PATH, headers=WS_HEADERS) as ws:
        ws.send_json(config)
        for text in texts:
            ws.send_json({"type": "input.text", "text": text})
            ws.send_json({"type": "input.done"})
        ws.send_json({"type": "session.close"})
        messages, closed = received(ws)
    assert closed == 1000
    return messages


def test_each_segment_in_order_and_each_utterance_done(client: TestClient) -> None:
    messages = utterances(client, CONFIG, "One. Two.", "Three.")
    assert kinds(messages) == (["audio.start", "bytes", "audio.done"] * 2 + ["session.done"]) + (
        ["audio.start", "bytes", "audio.done", "session.done"]
    )
    starts = [m for m in messages if not isinstance(m, bytes) and m["type"] == "audio.start"]
    assert [(m["utterance_index"], m["sentence_index"]) for m in starts] == [(0, 0), (0, 1), (1, 0)]
    assert starts[0]["format"] == "pcm" and starts[0]["sample_rate"] == 24000
    done = [m for m in messages if not isinstance(m, bytes) and m["type"] == "session.done"]
    assert [(m["utterance_index"], m["total_sentences"]) for m in done] == [(0, 2), (1, 1)]


def test_total_bytes_is_what_was_sent(client: TestClient) -> None:
    messages = utterances(client, CONFIG, "A sentence of some length.")
    audio = b"".join(m for m in messages if isinstance(m, bytes))
    ended = messages[kinds(messages).index("audio.done")]
    assert ended["total_bytes"] == len(audio) > 0 and ended["error"] is None
    assert ended["qa"].startswith("passed")


def test_without_stream_audio_a_segments_audio_is_one_frame(client: TestClient) -> None:
    wav = {**CONFIG, "response_format": "wav"}
    streamed = utterances(client, wav, LONG)
    held = utterances(client, {**wav, "stream_audio": False}, LONG)
    assert kinds(held) == ["audio.start", "bytes", "audio.done", "session.done"]
    frames = [m for m in streamed if isinstance(m, bytes)]
    assert len(frames) > 1  # streamed, the same audio came in pieces
    assert held[1][:4] == b"RIFF" and len(held[1]) == sum(map(len, frames))
