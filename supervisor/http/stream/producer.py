"""A session's producer: each segment made as a speech request of its own through the speech
route's path (`speech.parse`, `steps.start`: the same checks, limits, lexicons and voices),
at most AHEAD of the one being sent, its audio encoded into its `Made.frames` as it comes.
"""

from __future__ import annotations

import logging

from supervisor.errors import ServerError
from supervisor.http.routes import speech
from supervisor.http.stream.session import Made, Segment, Session
from supervisor.speech.audio import delivery
from supervisor.speech.checks import word_timestamps
from supervisor.speech.synthesis import steps
from supervisor.tracing.edge import segment_task

log = logging.getLogger("omnivoice.stream")


async def produce(session: Session) -> None:
    """Start each segment once one of the slots is free; pass markers on in order."""
    while True:
        while not session.pending:
            session.wake.clear()
            await session.wake.wait()
        item = session.pending[0]
        if isinstance(item, Segment):
            await session.slots.acquire()
            made = Made(item)
            made.task, made.trace_id = segment_task(item, make(session, made))
            session.made.add(made)
            session.pending.popleft()
            await session.ordered.put(made)
        else:
            session.pending.popleft()
            await session.ordered.put(item)


async def make(session: Session, made: Made) -> None:
    """A segment through the speech route's path, its audio encoded into `frames`."""
    synthesis = None
    svc, owner = session.svc, session.owner
    assert owner is not None
    try:
        body = {**made.segment.config, "input": made.segment.text}
        request, voice = speech.parse(svc, owner, body)
        synthesis = await steps.start(
            svc,
            owner,
            request,
            voice,
            first_short=not made.segment.index,
            heard=made.segment.hold_for_checks,
        )
        timeout_s = request.request_timeout_s or svc.settings.http.request_timeout_s
        pcm: list[bytes] = []
        pieces = word_timestamps.kept(speech.Deadline(timeout_s).pieces(synthesis.pieces()), pcm)
        first = await pieces.__anext__()
        fmt, wanted = request.response_format, delivery.profile(request)
        made.fmt, made.rate = fmt, wanted.rate(fmt, first.sample_rate)
        made.started.set()
        async for data in steps.encoded(first, pieces, fmt, wanted):
            made.frames.put_nowait(data)
        made.qa = synthesis.verdict.header()
        if svc.hearing is not None and not made.segment.hold_for_checks:
            made.qa += "; asr=skipped"  # sent as made: not heard by the ASR sidecar
        if made.segment.words and svc.asr is not None:
            made.words = await word_timestamps.pcm_words(
                svc.asr,
                pcm,
                first.sample_rate,
                made.segment.text,
                request.language,
                request.tier,
                svc.settings.speech.asr_timeout_s,
            )
        made.frames.put_nowait(None)
    except ServerError as exc:
        made.frames.put_nowait(exc)
    except Exception as exc:  # a bug: this segment fails, the session goes on
        log.exception("segment %d of a speech session failed", made.segment.index)
        made.frames.put_nowait(ServerError(f"internal server error: {type(exc).__name__}"))
    finally:
        made.started.set()
        if synthesis is not None:
            synthesis.close()
