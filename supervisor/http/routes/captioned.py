"""`POST /v1/audio/speech/captioned`: a speech request answered as JSON, the audio (base64)
with the timing of each sentence, exact from chunk boundaries (each sentence is its own chunk).

    {"audio": "<base64>", "format": "mp3", "sample_rate": 24000,
     "segments": [{"text": "…", "start": 0.0, "end": 1.84}, …]}   (seconds)

`timestamp_granularities` (OpenAI's transcription name) takes "segment" (the default) and
"word"; "word" adds each segment's `"words": [{"word", "start", "end"}]`, timed by the ASR
sidecar of `--asr-model` (supervisor/speech/checks/word_timestamps.py), and is a 400
`word_timestamps_unavailable` on a server without one (docs/API.md, Captions).
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from supervisor.errors import InvalidRequest
from supervisor.http.auth import tenant
from supervisor.http.routes import services
from supervisor.http.routes.speech import (
    CLIENT_CLOSED,
    ClientGone,
    Deadline,
    read_json,
    until_disconnected,
)
from supervisor.speech.audio import delivery
from supervisor.speech.checks import quality, word_timestamps
from supervisor.speech.request import instructions, schemas
from supervisor.speech.synthesis import steps

FIELDS = schemas.SPEECH_FIELDS | {"timestamp_granularities"}
B64_SLICE = 3 * 2**16  # audio bytes encoded at a time: a multiple of 3, so no padding inside


async def captioned(request: Request) -> Response:
    svc = services(request)
    body = await read_json(request)
    speech = schemas.speech_request(body, svc.settings.speech, allowed=FIELDS)
    timed_words = word_timestamps.wants_words(body, svc.asr)
    if speech.stream_format != "audio":
        raise InvalidRequest(
            "The captioned answer is one JSON document: 'stream_format' \"sse\" is for "
            "/v1/audio/speech.",
            param="stream_format",
        )
    voice = steps.voice(svc, tenant(request), speech)
    synthesis = await steps.start(svc, tenant(request), speech, voice, captions=True)
    deadline = Deadline(speech.request_timeout_s or svc.settings.http.request_timeout_s)

    async def whole() -> bytes:
        pcm = b"".join([piece.audio async for piece in deadline.pieces(synthesis.pieces())])
        if timed_words and svc.asr is not None:
            await word_timestamps.add_words(
                svc.asr,
                pcm,
                synthesis.sample_rate,
                synthesis.segments,
                speech.language,
                speech.tier,
                svc.settings.speech.asr_timeout_s,
            )
        return pcm

    try:
        pcm = await until_disconnected(request, whole())
    except ClientGone:
        return Response(status_code=CLIENT_CLOSED)
    finally:
        synthesis.close()
    fmt, wanted = speech.response_format, delivery.profile(speech)
    data = await steps.encode_whole(fmt, pcm, synthesis.sample_rate, wanted)
    del pcm  # from here the encoded file is the only copy of the audio
    headers = {"X-Seed": str(synthesis.seed), quality.HEADER: synthesis.verdict.header()}
    if speech.instructions_read is not None:
        headers[instructions.HEADER] = speech.instructions_read
    rest = {
        "format": fmt,
        "sample_rate": wanted.rate(fmt, synthesis.sample_rate),
        "segments": synthesis.segments,
    }
    return with_audio(data, rest, headers)


def with_audio(data: bytes, rest: dict[str, object], headers: dict[str, str]) -> Response:
    """`{"audio": "<base64 of data>", **rest}`, byte for byte as JSONResponse writes it, made a
    slice at a time as it is sent: the audio is held once, as the encoded file, never also as
    base64 text and as a JSON body."""
    tail = json.dumps(rest, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    head, end = b'{"audio":"', b'",' + tail[1:].encode()
    size = len(head) + 4 * math.ceil(len(data) / 3) + len(end)

    async def body() -> AsyncIterator[bytes]:
        yield head
        view = memoryview(data)
        for start in range(0, len(data), B64_SLICE):
            yield base64.b64encode(view[start : start + B64_SLICE])
        yield end

    headers = {**headers, "Content-Length": str(size)}
    return StreamingResponse(body(), media_type="application/json", headers=headers)
