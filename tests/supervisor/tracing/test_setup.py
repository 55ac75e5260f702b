"""supervisor/tracing/setup.py: on only when a collector or a file is named; the file's lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from supervisor.settings import Settings
from supervisor.tracing import setup, spans


@pytest.fixture(autouse=True)
def no_collector(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*setup.ENDPOINT_VARIABLES, "OTEL_SDK_DISABLED"):
        monkeypatch.delenv(name, raising=False)


def test_nothing_named_nothing_runs() -> None:
    assert setup.start(Settings(engine="null").server) is False
    assert not spans.enabled()


def test_a_trace_file_gets_every_span_as_a_json_line(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "spans.jsonl"
    assert setup.start(Settings(engine="null", trace_file=str(path)).server) is True
    try:
        root = spans.root("POST /x", spans.item_trace_id("j", 0))
        with spans.use(root, end=True), spans.span("admission", {"omnivoice.audio_s": 1.5}):
            pass
    finally:
        setup.stop()  # flushes the batch
    assert not spans.enabled()
    admission, done = (json.loads(line) for line in path.read_text().splitlines())
    assert done["name"] == "POST /x" and done["parent_id"] is None
    assert done["trace_id"] == admission["trace_id"] == format(spans.item_trace_id("j", 0), "032x")
    assert admission["parent_id"] == done["span_id"]
    assert admission["attributes"] == {"omnivoice.audio_s": 1.5}
    assert done["start_ns"] <= admission["start_ns"] <= admission["end_ns"] <= done["end_ns"]


def test_the_sdk_switch_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    assert (
        setup.start(Settings(engine="null", trace_file=str(tmp_path / "spans.jsonl")).server)
        is False
    )
    assert not spans.enabled() and not (tmp_path / "spans.jsonl").exists()


def test_the_collector_variables_name_the_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    assert setup.collector() is None
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")
    assert setup.collector() == "http://collector:4318"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://traces:4318/v1/traces")
    assert setup.collector() == "http://traces:4318/v1/traces"
