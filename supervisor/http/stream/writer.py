"""A session's writer: each segment's `audio.start`, its audio as binary frames (a whole file in
the session's format) and `audio.done`, in order; `session.done` after an utterance's last; the
close once the client's `session.close` has been answered.
"""

from __future__ import annotations

import time

from supervisor.errors import ServerError
from supervisor.http.stream.session import Made, Session, UtteranceEnd


async def write(session: Session) -> None:
    """Each segment's messages and audio, in order; session.done after each utterance."""
    while True:
        item = await session.ordered.get()
        if item is None:
            await session.ws.close()
            return
        if isinstance(item, UtteranceEnd):
            await session.send(
                {
                    "type": "session.done",
                    "utterance_index": item.utterance,
                    "total_sentences": item.count,
                }
            )
            continue
        session.busy = True
        try:
            await send_segment(session, item)
        finally:
            session.busy = False
            session.active_at = time.monotonic()
            session.made.discard(item)
            session.slots.release()


async def send_segment(session: Session, made: Made) -> None:
    segment = made.segment
    await made.started.wait()
    fmt = (
        made.fmt
        or segment.config.get("response_format")
        or session.svc.settings.speech.default_response_format
    )
    await session.send(
        {
            "type": "audio.start",
            "utterance_index": segment.utterance,
            "sentence_index": segment.index,
            "sentence_text": segment.text,
            "format": fmt,
            "sample_rate": made.rate,
        }
    )
    total, held, error = 0, bytearray(), None
    while (data := await made.frames.get()) is not None:
        if isinstance(data, ServerError):
            error = data.message
            break
        total += len(data)
        if session.stream_audio and segment.stream_audio:
            await session.send(data)
        else:
            held += data
    if held:
        await session.send(bytes(held))
    await session.send(
        {
            "type": "audio.done",
            "utterance_index": segment.utterance,
            "sentence_index": segment.index,
            "total_bytes": total,
            "error": error,
            "qa": made.qa,
            "trace_id": made.trace_id,
            **({"words": made.words} if made.words is not None else {}),
        }
    )
