"""supervisor/tracing/spans.py: trace ids with tracing off, chosen ids, spans only inside a trace."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from supervisor.tracing import setup, spans


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    memory = InMemorySpanExporter()
    provider = TracerProvider(id_generator=setup.ChosenIds())
    provider.add_span_processor(SimpleSpanProcessor(memory))
    spans.install(provider)
    yield memory
    spans.install(None)
    provider.shutdown()


def test_off_a_root_only_carries_a_fresh_trace_id() -> None:
    assert not spans.enabled()
    first, second = spans.root("a"), spans.root("b")
    assert not first.is_recording()
    assert len({spans.hex_trace_id(first), spans.hex_trace_id(second)}) == 2
    assert all(len(spans.hex_trace_id(r)) == 32 for r in (first, second))
    with spans.use(first), spans.span("inner"):
        assert spans.current_trace_id() == spans.hex_trace_id(first)
    assert spans.current_trace_id() is None
    assert spans.record("queue", first, time.monotonic(), time.monotonic()) is None


def test_an_item_keeps_its_trace_id_whether_tracing_is_on_or_off(
    exporter: InMemorySpanExporter,
) -> None:
    chosen = spans.item_trace_id("job-1", 3)
    assert chosen == spans.item_trace_id("job-1", 3) != spans.item_trace_id("job-1", 4)
    spans.root("job.item", chosen).end()
    (done,) = exporter.get_finished_spans()
    assert done.context is not None and done.context.trace_id == chosen
    spans.install(None)
    assert spans.root("job.item", chosen).get_span_context().trace_id == chosen


def test_a_span_outside_any_trace_is_not_recorded(exporter: InMemorySpanExporter) -> None:
    with spans.span("encode"):
        pass
    assert spans.record("admission", spans.current(), time.monotonic(), time.monotonic()) is None
    assert exporter.get_finished_spans() == ()
    root = spans.root("POST /x")
    with spans.use(root, end=True), spans.span("admission"):
        pass
    assert [s.name for s in exporter.get_finished_spans()] == ["admission", "POST /x"]


def test_a_recorded_span_keeps_the_times_it_was_given(exporter: InMemorySpanExporter) -> None:
    now = time.monotonic()
    root = spans.root("POST /x")
    done = spans.record("queue", root, now - 0.5, now - 0.2, {"omnivoice.kills": 0})
    assert done is not None and done.parent is not None
    (queue,) = exporter.get_finished_spans()
    assert queue.start_time is not None and queue.end_time is not None
    assert abs((queue.end_time - queue.start_time) / 1e9 - 0.3) < 0.01
    assert abs(queue.start_time - (time.time_ns() - 0.5e9)) < 0.1e9
    assert queue.parent is not None and queue.parent.span_id == root.get_span_context().span_id
