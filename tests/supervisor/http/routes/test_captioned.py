"""The captioned answer's body: what JSONResponse wrote, byte for byte, but made a slice at a
time, so that the audio is held once (the route itself, live: tests/integration/test_text_api.py)."""

from __future__ import annotations

import asyncio
import base64
import os
import tracemalloc
from typing import Any

import pytest
from starlette.responses import JSONResponse, StreamingResponse

from supervisor.http.routes.captioned import B64_SLICE, with_audio

REST: dict[str, Any] = {
    "format": "wav",
    "sample_rate": 24000,
    "segments": [{"text": "Grüße, ça va? 你好", "start": 0.0, "end": 1.5}],
}


def body_of(response: StreamingResponse) -> bytes:
    async def read() -> bytes:
        return b"".join([bytes(part) async for part in response.body_iterator])

    return asyncio.run(read())


@pytest.mark.parametrize("size", [0, 1, 2, 3, 4, B64_SLICE - 1, B64_SLICE, 2 * B64_SLICE + 5])
def test_the_body_is_what_json_response_wrote(size: int) -> None:
    data = os.urandom(size)
    response = with_audio(data, REST, {"X-Seed": "1"})
    made = body_of(response)
    assert made == JSONResponse({"audio": base64.b64encode(data).decode(), **REST}).body
    assert response.headers["content-length"] == str(len(made))
    assert response.headers["x-seed"] == "1"


def test_the_audio_is_held_once() -> None:
    """Before: the encoded file, its base64 text and the JSON body were all held at once."""
    data = os.urandom(24 * 2**20)
    tracemalloc.start()
    try:
        response = with_audio(data, REST, {})
        total = 0

        async def send() -> None:
            nonlocal total
            async for part in response.body_iterator:
                total += len(part)  # as a client takes it

        asyncio.run(send())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert total > len(data)
    assert peak < 2 * B64_SLICE + 2**20  # a slice at a time, not another copy of the audio
