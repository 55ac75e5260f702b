"""`POST /v1/audio/speech/captioned`: a speech request answered as JSON, the audio (base64)
with the timing of each sentence, exact from chunk boundaries (each sentence is its own chunk).

    {"audio": "<base64>", "format": "mp3", "sample_rate": 24000,
     "segments": [{"text": "…", "start": 0.0, "end": 1.84}, …]}   (seconds)
"""

from __future__ import annotations

import asyncio
import base64

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from supervisor import formats, instructions, quality, schemas
from supervisor.api import services
from supervisor.api.speech import CLIENT_CLOSED, ClientGone, Deadline, read_json, until_disconnected
from supervisor.errors import InvalidRequest
from supervisor.synthesis import Synthesis
from supervisor.voice_store import resolve_voice, voice_resolver


async def captioned(request: Request) -> Response:
    svc = services(request)
    speech = schemas.speech_request(await read_json(request), svc.settings)
    if speech.stream_format != "audio":
        raise InvalidRequest("The captioned answer is one JSON document: 'stream_format' \"sse\" is for "
                             "/v1/audio/speech.", param="stream_format")  # fmt: skip
    voice = resolve_voice(speech, svc.voices)
    synthesis = Synthesis(svc.scheduler, speech, voice, svc.settings.chunk_s, voices=voice_resolver(speech, svc.voices),
                          lexicon=svc.lexicons.for_request(speech), captions=True, asr=svc.asr)  # fmt: skip
    deadline = Deadline(speech.request_timeout_s or svc.settings.request_timeout_s)

    async def whole() -> bytes:
        return b"".join([piece["audio"] async for piece in deadline.pieces(synthesis.pieces())])

    try:
        pcm = await until_disconnected(request, whole())
    except ClientGone:
        return Response(status_code=CLIENT_CLOSED)
    finally:
        synthesis.close()
    fmt = speech.response_format
    if formats.is_cheap(fmt):
        data = formats.encode(fmt, pcm, synthesis.sample_rate)
    else:  # the compressed formats in a worker thread, off the event loop
        data = await asyncio.to_thread(formats.encode, fmt, pcm, synthesis.sample_rate)
    headers = {"X-Seed": str(synthesis.seed), quality.HEADER: synthesis.verdict.header()}
    if speech.instructions_read is not None:
        headers[instructions.HEADER] = speech.instructions_read
    answer = {
        "audio": base64.b64encode(data).decode(),
        "format": fmt,
        "sample_rate": synthesis.sample_rate,
        "segments": synthesis.segments,
    }
    return JSONResponse(answer, headers=headers)
