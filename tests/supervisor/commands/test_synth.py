"""The synth client's manifest rules and resume bookkeeping (no server: see tests/integration/test_jobs_api.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from supervisor.commands.synth_manifest import ManifestEntry, ManifestError, RunState, read_manifest


def manifest(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "m.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_ids_default_to_the_line_number_and_blank_lines_are_skipped(tmp_path: Path) -> None:
    entries = read_manifest(
        manifest(
            tmp_path, '{"input": "a"}', "", '{"id": "x", "input": "b", "response_format": "wav"}'
        )
    )
    assert [(e.line, e.id, e.format) for e in entries] == [(1, "1", None), (3, "x", "wav")]
    assert entries[0].item == {
        "id": "1",
        "input": "a",
    }  # the id is sent, so the server's item is named the same


def test_every_problem_is_reported_with_its_line(tmp_path: Path) -> None:
    path = manifest(
        tmp_path,
        '{"id": "a", "input": "x"}',
        "not json",
        '["a list"]',
        '{"id": "a", "input": "y"}',
        '{"id": "../up", "input": "z"}',
        '{"id": "f", "input": "z", "response_format": "m/p3"}',
    )
    with pytest.raises(ManifestError) as raised:
        read_manifest(path)
    problems = raised.value.problems
    assert [p.split(":")[1] for p in problems] == ["2", "3", "4", "5", "6"]
    assert (
        "not JSON" in problems[0]
        and "also on line 1" in problems[2]
        and "becomes a file name" in problems[3]
    )


def test_an_item_is_done_when_its_file_is_there(tmp_path: Path) -> None:
    given = ManifestEntry(1, "a", {"id": "a", "input": "x", "response_format": "wav"}, "wav")
    default = ManifestEntry(2, "b", {"id": "b", "input": "y"}, None)
    assert not given.is_in(tmp_path) and not default.is_in(tmp_path)
    (tmp_path / "a.mp3").write_bytes(b"")  # another format than asked: not it
    (tmp_path / "b.flac").write_bytes(b"")  # the server's default format, whatever it was
    assert not given.is_in(tmp_path) and default.is_in(tmp_path)


def test_the_state_file_forgets_an_item_whose_line_changed(tmp_path: Path) -> None:
    entry = ManifestEntry(1, "a", {"id": "a", "input": "x"}, None)
    state = RunState(tmp_path)
    state.record(entry, "job_1", 0)
    state.save()
    again = RunState(tmp_path)
    assert again.job_of(entry) == ("job_1", 0)
    assert again.job_of(ManifestEntry(1, "a", {"id": "a", "input": "edited"}, None)) is None
    (tmp_path / ".synth-state.json").write_text("{not json")
    assert (
        RunState(tmp_path).items == {}
    )  # unreadable: submitted again, under the same idempotency keys
    assert json.loads(json.dumps(again.items))["a"]["job"] == "job_1"


def test_a_download_cut_short_is_not_renamed_into_place(tmp_path: Path) -> None:
    """A real socket that promises 1000 bytes and closes after 10 (a server killed mid-answer):
    http.client hands the 10 over as if whole; the download must neither keep them nor rename
    them into place, and says it did not finish."""
    import io
    import socket
    import threading

    from supervisor.commands.synth_client import Client, Incomplete

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + b"x" * 10)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        client = Client(f"http://127.0.0.1:{port}", None, retry_s=0.0, log=io.StringIO())
        with pytest.raises(Incomplete, match="ended after 10 of 1000 bytes"):
            client.download("/v1/jobs/j/items/0/audio", tmp_path / "a.wav")
    finally:
        listener.close()
        thread.join(5)
    assert list(tmp_path.iterdir()) == []
