"""`POST /v1/audio/speech/captioned`: a speech request answered as JSON, the audio (base64)
with the timing of each sentence, exact from chunk boundaries (each sentence is its own chunk).

    {"audio": "<base64>", "format": "mp3", "sample_rate": 24000,
     "segments": [{"text": "…", "start": 0.0, "end": 1.84}, …]}   (seconds)

`timestamp_granularities` (OpenAI's transcription name) takes "segment" (the default) and
"word"; "word" adds each segment's `"words": [{"word", "start", "end"}]`, timed by the ASR
sidecar of `--asr-model` (supervisor/speech/words.py), and is a 400
`word_timestamps_unavailable` on a server without one (docs/API.md, Captions).
"""

from __future__ import annotations

import base64

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

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
from supervisor.speech import delivery, instructions, quality, schemas, steps, words

FIELDS = schemas.SPEECH_FIELDS | {"timestamp_granularities"}


async def captioned(request: Request) -> Response:
    svc = services(request)
    body = await read_json(request)
    speech = schemas.speech_request(body, svc.settings, allowed=FIELDS)
    timed_words = words.wants_words(body, svc.asr)
    if speech.stream_format != "audio":
        raise InvalidRequest(
            "The captioned answer is one JSON document: 'stream_format' \"sse\" is for "
            "/v1/audio/speech.",
            param="stream_format",
        )
    voice = steps.voice(svc, tenant(request), speech)
    synthesis = await steps.start(svc, tenant(request), speech, voice, captions=True)
    deadline = Deadline(speech.request_timeout_s or svc.settings.request_timeout_s)

    async def whole() -> bytes:
        pcm = b"".join([piece.audio async for piece in deadline.pieces(synthesis.pieces())])
        if timed_words and svc.asr is not None:
            await words.add_words(
                svc.asr,
                pcm,
                synthesis.sample_rate,
                synthesis.segments,
                speech.language,
                speech.tier,
                svc.settings.asr_timeout_s,
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
    headers = {"X-Seed": str(synthesis.seed), quality.HEADER: synthesis.verdict.header()}
    if speech.instructions_read is not None:
        headers[instructions.HEADER] = speech.instructions_read
    answer = {
        "audio": base64.b64encode(data).decode(),
        "format": fmt,
        "sample_rate": wanted.rate(fmt, synthesis.sample_rate),
        "segments": synthesis.segments,
    }
    return JSONResponse(answer, headers=headers)
