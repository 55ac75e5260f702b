"""Every request's timeline (supervisor/tracing/): the spans of a speech request, a job item and a
WebSocket segment, read from the SDK's in-memory exporter of a real server run in this process
(`in_process_server`: uvicorn, a real null-engine sidecar, real sockets), are complete and
nested, and the trace id the client is told is the one exported. Tracing off, and the export
to a collector and a file: test_tracing_export.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from websockets.sync.client import connect

from supervisor.tracing import setup, spans
from tests.helpers.in_process_server import in_process
from tests.helpers.waits import wait_until

WAIT_S = 60.0
HEX32 = re.compile(r"[0-9a-f]{32}")
# What every generation task adds under its request's root, and what goes under its `batch`.
TASK_SPANS = {"admission", "queue", "batch", "encode"}
BATCH_SPANS = {"steps", "decode"}

Traced = tuple[str, InMemorySpanExporter]


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Traced]:
    """A server whose spans go to an in-memory exporter, as they end."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(id_generator=setup.ChosenIds())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    spans.install(provider)
    try:
        with in_process(tmp_path_factory.mktemp("traced")) as url:
            yield url, exporter
    finally:
        spans.install(None)
        provider.shutdown()


def hex_id(value: int) -> str:
    return format(value, "032x")


def trace_of(exporter: InMemorySpanExporter, trace_id: str) -> list[ReadableSpan]:
    return [
        s
        for s in exporter.get_finished_spans()
        if s.context is not None and hex_id(s.context.trace_id) == trace_id
    ]


def wait_for_trace(
    exporter: InMemorySpanExporter, trace_id: str, done: Callable[[list[ReadableSpan]], bool]
) -> list[ReadableSpan]:
    """The trace's spans once `done` holds of them (a root ends after its answer is sent)."""

    def spans_done() -> list[ReadableSpan] | None:
        found = trace_of(exporter, trace_id)
        return found if done(found) else None

    try:
        return wait_until(spans_done, WAIT_S, f"the spans of trace {trace_id}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {[s.name for s in trace_of(exporter, trace_id)]}") from exc


def has(*names: str) -> Callable[[list[ReadableSpan]], bool]:
    return lambda found: set(names) <= {s.name for s in found}


def assert_nested(found: list[ReadableSpan], root_name: str) -> ReadableSpan:
    """One root named `root_name`; the task's spans under it, steps and decode under `batch`;
    each child starts no earlier than its parent. Returns the root."""
    by_id = {s.context.span_id: s for s in found if s.context is not None}
    roots = [s for s in found if s.parent is None]
    assert [r.name for r in roots] == [root_name], [(s.name, s.parent) for s in found]
    (root,) = roots
    for span in found:
        if span is root:
            continue
        assert span.parent is not None and span.parent.span_id in by_id, f"{span.name}: orphan"
        parent = by_id[span.parent.span_id]
        expected = "batch" if span.name in BATCH_SPANS else root_name
        assert parent.name == expected, f"{span.name} under {parent.name}"
        assert span.start_time is not None and parent.start_time is not None
        assert span.start_time >= parent.start_time, f"{span.name} starts before {parent.name}"
    return root


def assert_batch_figures(found: list[ReadableSpan]) -> None:
    """The batch's and the sidecar's own figures ride on the spans."""
    batch = next(s for s in found if s.name == "batch")
    steps = next(s for s in found if s.name == "steps")
    assert batch.attributes is not None and steps.attributes is not None
    assert batch.attributes["omnivoice.batch.items"] >= 1
    assert batch.attributes["omnivoice.batch.tokens"] > 0
    assert batch.attributes["omnivoice.sidecar.generate_s"] > 0
    assert steps.attributes["omnivoice.sidecar.steps"] > 0


def test_a_speech_request_is_one_nested_trace_named_in_its_header(traced: Traced) -> None:
    url, exporter = traced
    reply = httpx.post(
        url + "/v1/audio/speech",
        json={"model": "tts-1", "input": "Hello there, traced.", "voice": "alloy"},
        timeout=WAIT_S,
    )
    assert reply.status_code == 200, reply.text
    trace_id = reply.headers["x-trace-id"]
    assert HEX32.fullmatch(trace_id)
    found = wait_for_trace(exporter, trace_id, has("POST /v1/audio/speech", *BATCH_SPANS))
    root = assert_nested(found, "POST /v1/audio/speech")
    assert {s.name for s in found} == TASK_SPANS | BATCH_SPANS | {root.name, "first_byte"}
    assert root.attributes is not None and root.attributes["http.response.status_code"] == 200
    queue = next(s for s in found if s.name == "queue")
    assert queue.end_time is not None and root.end_time is not None
    assert queue.end_time <= root.end_time
    assert_batch_figures(found)


def test_a_refused_request_still_names_its_trace(traced: Traced) -> None:
    url, exporter = traced
    reply = httpx.post(url + "/v1/audio/speech", json={"input": ""}, timeout=WAIT_S)
    assert reply.status_code == 400
    trace_id = reply.headers["x-trace-id"]
    found = wait_for_trace(exporter, trace_id, has("POST /v1/audio/speech"))
    assert {s.name for s in found} == {"POST /v1/audio/speech", "first_byte"}  # the error's
    root = assert_nested(found, "POST /v1/audio/speech")
    assert root.attributes is not None and root.attributes["http.response.status_code"] == 400


def test_a_job_item_is_a_trace_of_its_own_named_in_its_view(traced: Traced) -> None:
    url, exporter = traced
    created = httpx.post(
        url + "/v1/jobs",
        json={"items": [{"input": "A job item, traced.", "voice": "alloy"}]},
        timeout=WAIT_S,
    )
    assert created.status_code == 202, created.text
    job_id = created.json()["id"]

    def ended() -> dict[str, Any] | None:
        job: dict[str, Any] = httpx.get(f"{url}/v1/jobs/{job_id}", timeout=WAIT_S).json()
        return job if job["state"] in ("completed", "failed") else None

    job = wait_until(ended, WAIT_S, f"job {job_id} to end")
    (item,) = job["items"]
    assert item["state"] == "done", item
    assert item["trace_id"] == hex_id(spans.item_trace_id(job_id, 0))
    found = wait_for_trace(exporter, item["trace_id"], has("job.item", *BATCH_SPANS))
    root = assert_nested(found, "job.item")
    assert {s.name for s in found} == TASK_SPANS | BATCH_SPANS | {root.name}
    assert root.attributes is not None and root.attributes["omnivoice.job.id"] == job_id
    assert_batch_figures(found)


def test_each_websocket_segment_is_a_trace_named_in_its_audio_done(traced: Traced) -> None:
    url, exporter = traced
    done: list[dict[str, Any]] = []
    with connect(url.replace("http://", "ws://") + "/v1/audio/speech/stream") as ws:
        ws.send(json.dumps({"type": "session.config", "voice": "alloy", "response_format": "pcm"}))
        ws.send(json.dumps({"type": "input.text", "text": "The first one. The second one."}))
        ws.send(json.dumps({"type": "input.done"}))
        while True:
            got = ws.recv(timeout=WAIT_S)
            if isinstance(got, bytes):
                continue
            event = json.loads(got)
            assert event["type"] != "error", event
            if event["type"] == "audio.done":
                done.append(event)
            if event["type"] == "session.done":
                break
    assert len(done) == 2
    trace_ids = [event["trace_id"] for event in done]
    assert len(set(trace_ids)) == 2 and all(HEX32.fullmatch(t) for t in trace_ids)
    for trace_id in trace_ids:
        found = wait_for_trace(exporter, trace_id, has("speech.segment", *BATCH_SPANS))
        root = assert_nested(found, "speech.segment")
        assert {s.name for s in found} == TASK_SPANS | BATCH_SPANS | {root.name}
        assert_batch_figures(found)
