"""Where a server's spans go (supervisor/tracing/setup.py), each on a live server of its own
(`live_server`, the null engine): nowhere by default, though every answer and access log line
names a trace id; to a collector over OTLP/HTTP when `OTEL_EXPORTER_OTLP_ENDPOINT` names one
(a real HTTP receiver here, decoding the protobuf the exporter sends); to a JSON-lines file with
`--trace-file`.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.helpers.live_server import LiveServer, live
from tests.helpers.waits import wait_until

WAIT_S = 30.0
HEX32 = re.compile(r"[0-9a-f]{32}")
SPEECH = {"model": "tts-1", "input": "Hello there, exported.", "voice": "alloy"}
EXPECTED = {"POST /v1/audio/speech", "admission", "queue", "batch", "steps", "decode", "encode"}


def speak(server: LiveServer) -> str:
    reply = server.request("POST", "/v1/audio/speech", json=SPEECH)
    assert reply.status_code == 200, reply.text
    trace_id = reply.headers["x-trace-id"]
    assert HEX32.fullmatch(trace_id)
    return trace_id


class Collector:
    """An OTLP/HTTP trace receiver: each POST to /v1/traces decoded, its spans kept by name."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, str]] = []  # (trace id, name)
        self.paths: list[str] = []
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = ExportTraceServiceRequest.FromString(body)
                collector.paths.append(self.path)
                for resource in request.resource_spans:
                    for scope in resource.scope_spans:
                        collector.spans += [(s.trace_id.hex(), s.name) for s in scope.spans]
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def names(self, trace_id: str) -> set[str]:
        return {name for t, name in self.spans if t == trace_id}


@pytest.fixture
def collector() -> Iterator[Collector]:
    running = Collector()
    yield running
    running.server.shutdown()
    running.server.server_close()


def test_off_by_default_yet_every_answer_and_access_line_names_its_trace(tmp_path: Path) -> None:
    with live(tmp_path) as server:
        first, second = speak(server), speak(server)
        assert first != second
        log = server.log.read_text()
    assert "tracing on" not in log
    assert f'"POST /v1/audio/speech HTTP/1.1" 200 trace_id={first}' in log


def test_spans_go_to_the_collector_the_environment_names(
    tmp_path: Path, collector: Collector, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")  # honoured: the batch goes out at once
    with live(tmp_path) as server:
        trace_id = speak(server)
        wait_until(lambda: collector.names(trace_id) >= EXPECTED, WAIT_S, "the request's spans")
        assert "tracing on" in server.log.read_text()
    assert set(collector.paths) == {"/v1/traces"}


def test_spans_go_to_the_file_trace_file_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    path = tmp_path / "spans.jsonl"
    with live(tmp_path, "--trace-file", str(path)) as server:
        trace_id = speak(server)

        def written() -> set[str]:
            lines = path.read_text().splitlines() if path.exists() else []
            return {s["name"] for s in map(json.loads, lines) if s["trace_id"] == trace_id}

        wait_until(lambda: written() >= EXPECTED, WAIT_S, "the request's spans in the file")
    spans = [json.loads(line) for line in path.read_text().splitlines()]
    root = next(s for s in spans if s["trace_id"] == trace_id and s["parent_id"] is None)
    assert root["end_ns"] > root["start_ns"] and root["attributes"]["http.route"]
