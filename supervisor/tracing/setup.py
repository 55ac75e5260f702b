"""Whether spans are recorded, and where they go: a provider built at start-up, or none.

On when the standard `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` names
a collector (OTLP over HTTP, protobuf; the exporter reads the other `OTEL_EXPORTER_OTLP_*`
variables itself), or `--trace-file` names a file (a debugging aid: one JSON object a line per
span). Each goes through a BatchSpanProcessor, which honours `OTEL_BSP_*`; `OTEL_SDK_DISABLED`
turns it all off. The OTLP exporter is imported only when a collector is named.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

from supervisor.settings import ServerSettings
from supervisor.tracing import spans

ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
SERVICE_NAME = "omnivoice-supervisor"

_owned: TracerProvider | None = None  # the provider `start` built (and `stop` shuts down)


def collector() -> str | None:
    """The OTLP endpoint the environment names, if any."""
    return next((os.environ[name] for name in ENDPOINT_VARIABLES if os.environ.get(name)), None)


def start(settings: ServerSettings) -> bool:
    """Install a provider if the environment or the settings ask for spans; whether they do.
    A provider installed already (a test's) is left as it is."""
    global _owned
    if spans.enabled():
        return True
    endpoint, path = collector(), settings.trace_file
    disabled = os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"
    if disabled or (endpoint is None and not path):
        return False
    _owned = provider(endpoint is not None, path)
    spans.install(_owned)
    return True


def destination(settings: ServerSettings) -> str:
    """Where spans go, for the log: the collector, the file, or both."""
    return " and ".join(x for x in (collector(), settings.trace_file) if x)


def stop() -> None:
    """Send what is still buffered and stop recording (the server's end)."""
    global _owned
    if _owned is not None:
        spans.install(None)
        _owned.shutdown()
        _owned = None


def provider(otlp: bool, path: str | None) -> TracerProvider:
    name = {} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": SERVICE_NAME}
    made = TracerProvider(resource=Resource.create(name), id_generator=ChosenIds())
    if otlp:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        made.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    if path:
        made.add_span_processor(BatchSpanProcessor(JsonLinesExporter(Path(path))))
    return made


class ChosenIds(RandomIdGenerator):
    """Random ids, but a root span takes `spans.chosen_trace_id` when one is set."""

    def generate_trace_id(self) -> int:
        return spans.chosen_trace_id.get() or super().generate_trace_id()


def span_line(span: ReadableSpan) -> str:
    """One finished span as a line of JSON: ids in hex, times in ns since the epoch."""
    ids, parent = span.get_span_context(), span.parent
    return json.dumps(
        {
            "name": span.name,
            "trace_id": format(ids.trace_id, "032x") if ids else None,
            "span_id": format(ids.span_id, "016x") if ids else None,
            "parent_id": format(parent.span_id, "016x") if parent else None,
            "start_ns": span.start_time,
            "end_ns": span.end_time,
            "attributes": dict(span.attributes or {}),
        }
    )


class JsonLinesExporter(SpanExporter):
    """Spans appended to a file, one JSON object a line (`span_line`)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.file = path.open("a", encoding="utf-8")
        self.lock = threading.Lock()

    def export(self, batch: Sequence[ReadableSpan]) -> SpanExportResult:
        with self.lock:
            self.file.write("".join(span_line(span) + "\n" for span in batch))
            self.file.flush()
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        with self.lock:
            self.file.close()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True
