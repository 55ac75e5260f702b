"""The spans of a request's timeline, through OpenTelemetry's API: the roots of a request, a
job item and a WebSocket segment, the spans around work on the event loop, and spans recorded
after the fact from times the pool and the sidecar measured.

Tracing is on once a provider is installed (supervisor/tracing/setup.py does it when a collector
or a file is named). Off, it costs next to nothing: `span` is a shared no-op, `record` returns at
once, and a root is a non-recording span that only carries a fresh trace id, so that every
answer still names one (`X-Trace-Id`, `trace_id`) and the access log line with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import random
import time
from asyncio import Task
from collections.abc import Coroutine, Iterator, Mapping
from contextlib import AbstractContextManager
from contextvars import ContextVar
from typing import Any, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context as Context
from opentelemetry.trace import NonRecordingSpan, Span, SpanContext, SpanKind, Tracer
from opentelemetry.util.types import AttributeValue

TRACER = "omnivoice.supervisor"
Attributes = Mapping[str, AttributeValue]
T = TypeVar("T")

# The trace id the next root span takes, when it is not a random one (a job item's).
chosen_trace_id: ContextVar[int | None] = ContextVar("omnivoice_chosen_trace_id", default=None)
_tracer: Tracer | None = None
# time.time_ns() - time.monotonic_ns(), taken when tracing is installed (`wall_ns`).
_EPOCH_OFFSET_NS = time.time_ns() - time.monotonic_ns()
_NO_SPAN: AbstractContextManager[None] = contextlib.nullcontext()


def install(provider: trace.TracerProvider | None) -> None:
    """Record spans through `provider` from now on (None: tracing off)."""
    global _tracer, _EPOCH_OFFSET_NS
    _tracer = provider.get_tracer(TRACER) if provider is not None else None
    _EPOCH_OFFSET_NS = time.time_ns() - time.monotonic_ns()


def enabled() -> bool:
    return _tracer is not None


def root(
    name: str,
    trace_id: int | None = None,
    attributes: Attributes | None = None,
    parent: Context | None = None,
    start_s: float | None = None,
) -> Span:
    """The first span of a new trace (not current: `use` makes it so). `trace_id`: the one it
    must have (a job item's, `item_trace_id`); `parent`: a caller's remote span, from its
    `traceparent` header; `start_s`: when it began (time.monotonic()), if not now."""
    if _tracer is None:
        ids = SpanContext(trace_id or random.getrandbits(128), random.getrandbits(64), False)
        return NonRecordingSpan(ids)
    token = chosen_trace_id.set(trace_id)
    try:
        return _tracer.start_span(
            name,
            context=parent or Context(),
            kind=SpanKind.SERVER,
            attributes=attributes,
            start_time=None if start_s is None else wall_ns(start_s),
        )
    finally:
        chosen_trace_id.reset(token)


def hex_trace_id(span: Span) -> str:
    """The span's trace id as 32 hex digits (W3C's and OTLP's spelling)."""
    return format(span.get_span_context().trace_id, "032x")


def current_trace_id() -> str | None:
    """The trace id of the span current here, if any."""
    ids = trace.get_current_span().get_span_context()
    return format(ids.trace_id, "032x") if ids.is_valid else None


def item_trace_id(job_id: str, index: int) -> int:
    """A job item's trace id, the same for every attempt at it: its view names it without
    storing it."""
    digest = hashlib.sha256(f"{job_id}/{index}".encode()).digest()
    return int.from_bytes(digest[:16], "big") or 1


@contextlib.contextmanager
def use(span: Span, end: bool = False) -> Iterator[Span]:
    """`span` is the current one inside the block (and ends with it, with `end`)."""
    with trace.use_span(span, end_on_exit=end):
        yield span


def start_task(root: Span, work: Coroutine[Any, Any, T], name: str | None = None) -> Task[T]:
    """`work` as a task of its own whose spans go under `root` (its context is a copy of this
    one, `root` current in it), and `root` ends with it: a job item's, a WebSocket segment's."""
    with use(root):
        task = asyncio.create_task(work, name=name)
    task.add_done_callback(lambda _done: root.end())
    return task


def current() -> Context:
    """The context here: a task made now keeps it, so its spans nest under the request's."""
    return otel_context.get_current()


def span(name: str, attributes: Attributes | None = None) -> AbstractContextManager[object]:
    """A span around a block, a child of the current one; a no-op when off, or outside any
    trace (a new trace of one span would say nothing)."""
    if _tracer is None or not trace.get_current_span().is_recording():
        return _NO_SPAN
    return _tracer.start_as_current_span(name, attributes=attributes)


def wall_ns(monotonic_s: float) -> int:
    """A time.monotonic() reading as nanoseconds since the epoch (what a span's times are).
    One offset between the two clocks, taken once: read afresh at each call, two conversions
    of the same reading could differ by the time between them, and a child span would seem to
    start before its parent."""
    return round(monotonic_s * 1e9) + _EPOCH_OFFSET_NS


def record(
    name: str,
    parent: Context | Span,
    start_s: float,
    end_s: float,
    attributes: Attributes | None = None,
) -> Span | None:
    """A span that has already happened, from `start_s` to `end_s` (time.monotonic()
    readings), under `parent` (a context or a span, ended or not); off, or outside any sampled
    trace (a job item's admission, whose trace begins once it is claimed), nothing."""
    if _tracer is None:
        return None
    ids = (
        parent if isinstance(parent, Span) else trace.get_current_span(parent)
    ).get_span_context()
    if not ids.is_valid or not ids.trace_flags.sampled:
        return None
    if isinstance(parent, Span):
        parent = trace.set_span_in_context(parent)
    done = _tracer.start_span(name, context=parent, start_time=wall_ns(start_s))
    if attributes:
        done.set_attributes(attributes)
    done.end(end_time=wall_ns(max(start_s, end_s)))
    return done
