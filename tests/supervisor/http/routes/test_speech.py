"""supervisor/http/routes/speech.py: which answers start with a short chunk (`streamed`), seen
in the chunk plan of a real SynthesisRun on the real scheduler."""

from __future__ import annotations

import asyncio
from typing import Any

from supervisor.http.routes.speech import streamed
from supervisor.settings import Settings
from supervisor.speech.request import schemas
from supervisor.speech.request.voice import Voice
from supervisor.speech.synthesis.runner import SynthesisRun
from supervisor.supervision.scheduler import Scheduler
from tests.helpers.texts import LONG

SETTINGS = Settings(engine="null", chunk_s=5.0)


def plan(first_short: bool | None = None, **fields: Any) -> list[str]:
    """The chunks a request's text becomes; `first_short` None: as the speech route decides."""

    async def chunks() -> list[str]:
        request = schemas.speech_request({"input": LONG, "seed": 1, **fields}, SETTINGS.speech)
        short = streamed(request) if first_short is None else first_short
        synthesis = SynthesisRun(
            Scheduler(SETTINGS.scheduling), request, Voice(), SETTINGS.speech, first_short=short
        )
        synthesis.close()
        return synthesis.chunks

    return asyncio.run(chunks())


def test_a_pcm_stream_is_chunked_as_sse_is() -> None:
    sse = plan(stream_format="sse", response_format="pcm")
    assert plan(response_format="pcm") == sse
    assert len(sse[0]) < len(plan(False, response_format="pcm")[0])  # it does start short


def test_other_formats_keep_the_whole_file_chunking() -> None:
    for fmt in ("mp3", "wav", "opus", "aac", "flac"):
        assert plan(response_format=fmt) == plan(False, response_format=fmt), fmt
    assert plan(response_format="mp3") != plan(stream_format="sse", response_format="mp3")
