"""Jobs and the synth command against a live server on the tiny checkpoint, over HTTP.

One server serves the module (`--max-batch-size 4`, so a job runs in several batches, and
`--chunk-s 2`, so a long item is chunked), once with each job store: SQLite, then PostgreSQL (a
real server the session starts, tests/helpers/pg_cluster.py), so the tests using it run against both.
The synth-resume test kills and restarts its own (SQLite).
Every result is decoded by libav to its end.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import srt

from supervisor.tenants import owner_of
from tests.helpers.job_helpers import (
    KEY,
    decoded_seconds,
    ended,
    job,
    run_synth,
    submit,
    synth_cut_by_a_server_kill,
    wait_gone,
    wait_job,
)
from tests.helpers.live_server import REPO_ROOT, LiveServer, live
from tests.helpers.texts import LONG, SENTENCES
from tests.helpers.waits import wait_until

FORMATS = ["wav", "mp3", "flac", "opus", "aac", "pcm"]


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def server(
    request: pytest.FixtureRequest, checkpoint_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    """The module's server, once per store: every test using it runs against both."""
    store = (
        "sqlite"
        if request.param == "sqlite"
        else request.getfixturevalue("pg_cluster").new_database()
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OMP_NUM_THREADS", "1")
        flags = ("--max-batch-size", "4", "--chunk-s", "2", "--store", store)
        with live(
            tmp_path_factory.mktemp("jobs"), *flags, checkpoint=checkpoint_dir, faults=True
        ) as running:
            yield running


def texts(count: int, marker: str = "") -> list[dict[str, Any]]:
    """Items that differ (numbered): identical items would be one generation, the rest served
    from the result cache."""
    return [
        {
            "id": f"t{i}",
            "input": f"{SENTENCES[i % 4]} Number {i}. {marker}".strip(),
            "response_format": "wav",
        }
        for i in range(count)
    ]


def job_count(server: LiveServer) -> int:
    return len(server.request("GET", "/v1/jobs?limit=100").json()["data"])


def test_a_job_runs_every_item_and_keeps_each_error(server: LiveServer) -> None:
    items = [
        {"id": "plain", "input": SENTENCES[0], "response_format": "wav"},
        {"id": "named-voice", "input": SENTENCES[1], "voice": "alloy"},  # mp3, the default
        {
            "id": "designed",
            "input": SENTENCES[2],
            "instructions": "female, british accent",
            "response_format": "flac",
        },
        {"input": SENTENCES[3], "response_format": "pcm", "seed": 5},  # no id
        {"id": "broken", "input": "This one fails. [[fault:raise]]", "response_format": "wav"},
        {"id": "long", "input": LONG, "response_format": "opus"},  # several chunks, one file
    ]
    created = submit(server, items)
    assert created["object"] == "job" and created["progress"]["total"] == 6
    assert created["owner"] == owner_of(KEY)  # a key the key file does not name: its hash
    assert [i["id"] for i in created["items"]] == [
        "plain",
        "named-voice",
        "designed",
        None,
        "broken",
        "long",
    ]
    final = wait_job(server, created["id"], ended, 120, "the job to end")
    assert final["state"] == "failed" and final["finished_at"] is not None
    assert final["progress"] == {
        "total": 6,
        "queued": 0,
        "running": 0,
        "done": 5,
        "failed": 1,
        "cancelled": 0,
    }
    broken = final["items"][4]
    assert broken["state"] == "failed" and broken["attempts"] == 1 and broken["audio_url"] is None
    assert broken["error"]["code"] == "generation_failed" and broken["error"]["status"] == 500
    assert "injected" in broken["error"]["message"]
    for item in final["items"]:
        if item["state"] != "done":
            continue
        assert item["attempts"] == 1 and item["seed"] is not None and item["audio_seconds"] > 0
        reply = server.request("GET", item["audio_url"])
        assert reply.status_code == 200, reply.text
        assert (
            f"{item['id'] or item['index']}.{item['format']}"
            in reply.headers["content-disposition"]
        )
        assert decoded_seconds(reply.content, item["format"]) > 0.3
    assert final["items"][3]["seed"] == 5
    not_done = server.request("GET", f"/v1/jobs/{created['id']}/items/4/audio")
    assert not_done.status_code == 409 and not_done.json()["error"]["code"] == "item_not_done"
    assert server.request("GET", f"/v1/jobs/{created['id']}/items/6/audio").status_code == 404
    for odd in (
        "%C2%B2",
        "1" * 30,
    ):  # a Unicode digit, and a number beyond SQLite's integers (found by the fuzz test)
        assert (
            server.request("GET", f"/v1/jobs/{created['id']}/items/{odd}/audio").status_code == 404
        )
    missing = server.request("GET", "/v1/jobs/job_nope")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "job_not_found"


def test_an_items_captions_and_quality_checks_are_kept_with_its_result(
    server: LiveServer,
) -> None:
    """Both stores keep captions beside the audio (SQLite: files; PostgreSQL: rows) and qa."""
    captioned = {
        "id": "read",
        "input": "The first sentence is here. A second one follows.",
        "response_format": "wav",
        "captions": True,
    }
    created = submit(server, [captioned, {"input": "No captions here.", "response_format": "wav"}])
    done = wait_job(server, created["id"], ended, 300, "the job to end")
    assert done["state"] == "completed", done
    base = f"/v1/jobs/{created['id']}/items"
    subrip = server.request("GET", f"{base}/0/captions.srt")
    assert subrip.status_code == 200 and subrip.headers["content-type"].startswith(
        "application/x-subrip"
    )
    assert subrip.headers["content-disposition"] == 'attachment; filename="read.srt"'
    cues = [cue.content for cue in srt.parse(subrip.text)]
    assert cues == ["The first sentence is here.", "A second one follows."]
    web = server.request("GET", f"{base}/0/captions.vtt")
    assert web.status_code == 200 and web.text.startswith("WEBVTT")
    missing = server.request("GET", f"{base}/1/captions.srt")
    assert missing.status_code == 404 and "captions" in missing.json()["error"]["message"]
    for item in done["items"]:
        assert item["qa"]["passed"] is True and item["qa"]["checks"], item


def test_the_same_idempotency_key_never_makes_a_second_job(server: LiveServer) -> None:
    items = [{"input": "Only once, please."}]
    first = submit(server, items, key="announce-2026-11-30")
    replay = server.request(
        "POST",
        "/v1/jobs",
        json={"items": items},
        headers={"Idempotency-Key": "announce-2026-11-30"},
    )
    assert replay.status_code == 202 and replay.json()["id"] == first["id"]
    assert replay.headers["idempotent-replayed"] == "true"
    other = server.request(
        "POST",
        "/v1/jobs",
        json={"items": [{"input": "Something else."}]},
        headers={"Idempotency-Key": "announce-2026-11-30"},
    )
    assert other.status_code == 409 and other.json()["error"]["code"] == "idempotency_key_reused"
    wait_job(server, first["id"], ended, 60, "the job to end")


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"items": [{"input": "fine"}, {"input": "who?", "voice": "nobody"}]}, "items[1].voice"),
        ({"items": [{"input": " "}]}, "items[0].input"),
        ({"items": [{"input": "x", "num_steps": 3}]}, "items[0].num_steps"),
        ({"items": [{"input": "x", "stream_format": "sse"}]}, "items[0].stream_format"),
        (
            {"items": [{"input": "x", "instruct": "cheerful pirate"}]},
            "items[0].instruct",
        ),  # strict: instructions read free-form text
        ({"items": [{"id": "a", "input": "x"}, {"id": "a", "input": "y"}]}, "items[1].id"),
        ({"items": [{"id": "../../etc/passwd", "input": "x"}]}, "items[0].id"),
        ({"items": ["just text"]}, "items[0]"),
        ({"items": []}, "items"),
        ({"itemz": [{"input": "x"}]}, "itemz"),
    ],
)
def test_items_are_checked_like_speech_requests_and_a_bad_job_stores_nothing(
    server: LiveServer, body: Any, param: str
) -> None:
    before = job_count(server)
    reply = server.request("POST", "/v1/jobs", json=body)
    assert reply.status_code == 400 and reply.json()["error"]["param"] == param, reply.text
    assert job_count(server) == before


def test_jobs_are_listed_newest_first_in_pages(server: LiveServer) -> None:
    ids = [submit(server, [{"input": f"Page test {i}."}])["id"] for i in range(3)]
    first = server.request("GET", "/v1/jobs?limit=2").json()
    assert (
        [j["id"] for j in first["data"]] == ids[:0:-1]
        and first["has_more"]
        and "items" not in first["data"][0]
    )
    second = server.request("GET", f"/v1/jobs?limit=2&after={first['last_id']}").json()
    assert second["data"][0]["id"] == ids[0]
    assert server.request("GET", "/v1/jobs?limit=0").status_code == 400
    for job_id in ids:
        wait_job(server, job_id, ended, 60, "the job to end")


def test_cancel_ends_what_has_not_run_and_keeps_finished_results(server: LiveServer) -> None:
    created = submit(server, texts(16, "[[fault:slow:0.6]]"))
    running = wait_job(
        server, created["id"], lambda j: j["progress"]["done"] >= 4, 60, "a first batch"
    )
    assert running["state"] == "running"
    reply = server.request("DELETE", f"/v1/jobs/{created['id']}")
    assert reply.status_code == 200 and reply.json()["state"] == "cancelled"
    # Issue 19.11: the first answer already counts the items that were running (it said cancelled: 0).
    first = reply.json()["progress"]
    assert first["running"] == first["queued"] == 0 and first["cancelled"] >= 4, first
    final = wait_job(server, created["id"], ended, 60, "the running items to stop")
    assert final["state"] == "cancelled" and final["progress"] == first
    assert final["progress"]["done"] + final["progress"]["cancelled"] == 16
    for item in final["items"]:
        if item["state"] == "done":
            assert server.request("GET", item["audio_url"]).status_code == 200
        else:
            gone = server.request("GET", f"/v1/jobs/{created['id']}/items/{item['index']}/audio")
            assert (
                gone.status_code == 409
                and "cancelled before it finished" in gone.json()["error"]["message"]
            )
    again = server.request("DELETE", f"/v1/jobs/{created['id']}")
    assert again.status_code == 200 and again.json()["progress"] == final["progress"]
    assert server.request("DELETE", "/v1/jobs/job_nope").status_code == 404


def test_an_interactive_request_does_not_wait_for_a_running_job(server: LiveServer) -> None:
    """Job items go to the scheduler a few batches at a time, at bulk priority: a speech request
    waits for at most the batches already handed to the sidecar, not for the rest of the job."""
    created = submit(server, texts(40))
    wait_job(server, created["id"], lambda j: j["progress"]["done"] >= 1, 60, "the job to start")
    before = job(server, created["id"])["progress"]["done"]
    reply = server.request(
        "POST",
        "/v1/audio/speech",
        json={"input": "Passengers for Brighton, platform two.", "response_format": "wav"},
    )
    assert reply.status_code == 200
    at_answer = job(server, created["id"])["progress"]
    # While it waited, at most the two batches the sidecar already held, the one it rode in (filled
    # up with job items) and one that ended between the poll and the request: 4 x 4 items, of the
    # 30-odd still to do when it arrived.
    assert at_answer["done"] - before <= 4 * 4, (before, at_answer)
    assert at_answer["queued"] + at_answer["running"] > 0, at_answer
    assert wait_job(server, created["id"], ended, 120, "the job to end")["state"] == "completed"


def test_sigterm_finishes_the_job_items_begun_and_hands_back_the_rest_untouched(
    checkpoint_dir: Path, tmp_path: Path
) -> None:
    """Issue 37.2: the drain lets the items a sidecar has begun finish and be written; the rest go
    back to `queued` at once, their claim not counted. Nothing is made twice: after the restart
    every item has one attempt (before, those in flight were cut off and made again: 2)."""
    flags = ("--max-batch-size", "2", "--drain-s", "60")
    with live(tmp_path, *flags, checkpoint=checkpoint_dir, faults=True) as server:
        created = submit(server, texts(20, "[[fault:slow:0.5]]"))
        seen = wait_job(server, created["id"], lambda j: j["progress"]["done"] >= 2, 60, "items")
        stopping = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(30) == 0
        stopped_in = time.monotonic() - stopping
    with contextlib.closing(sqlite3.connect(tmp_path / "data" / "jobs.sqlite3")) as db:
        states = dict(db.execute("SELECT state, COUNT(*) FROM items GROUP BY state").fetchall())
        counted = db.execute("SELECT MAX(attempts) FROM items WHERE state = 'queued'").fetchone()
    assert "running" not in states and states["queued"] > 8, states  # handed back, not left running
    assert states["done"] > seen["progress"]["done"], states  # the batch in flight was written
    assert counted[0] == 0, counted  # handed back untouched: no attempt counted
    with live(tmp_path, *flags, checkpoint=checkpoint_dir) as server:
        final = wait_job(server, created["id"], ended, 120, "the job to finish after the restart")
    assert final["state"] == "completed" and [i["attempts"] for i in final["items"]] == [1] * 20
    assert stopped_in < 15, stopped_in  # the batch in flight, not the 20 items' worth


# ---------------------------------------------------------------- synth


def write_manifest(path: Path, items: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(item) + "\n" for item in items))
    return path


def test_synth_writes_each_item_and_a_second_run_only_does_what_is_missing(
    server: LiveServer, tmp_path: Path
) -> None:
    items = [
        {"id": f"clip-{i}", "input": SENTENCES[i % 4], "response_format": FORMATS[i]}
        for i in range(6)
    ]
    items.append({"input": "No id: named after its line."})  # line 7 -> 7.mp3
    manifest, out = write_manifest(tmp_path / "manifest.jsonl", items), tmp_path / "out"
    args = (str(manifest), "--out", str(out), "--server", server.url, "--api-key", KEY)
    first = run_synth(*args)
    assert first.returncode == 0, first.stderr
    names = sorted(p.name for p in out.iterdir() if not p.name.startswith("."))
    assert names == sorted([f"clip-{i}.{fmt}" for i, fmt in enumerate(FORMATS)] + ["7.mp3"])
    for name in names:
        assert decoded_seconds((out / name).read_bytes(), name.rsplit(".", 1)[1]) > 0.3
    assert "7 to do" in first.stderr and "7 written" in first.stderr
    jobs_before = job_count(server)
    (out / "clip-2.flac").unlink()
    second = run_synth(*args)
    assert second.returncode == 0, second.stderr
    assert (
        "6 already in" in second.stderr
        and "following 1 item" in second.stderr
        and "1 written" in second.stderr
    )
    assert (out / "clip-2.flac").is_file() and job_count(
        server
    ) == jobs_before  # fetched again, not generated again
    third = run_synth(*args)
    assert third.returncode == 0 and "0 to do" in third.stderr and job_count(server) == jobs_before


def test_synth_interrupted_writes_the_items_already_finished(
    server: LiveServer, tmp_path: Path
) -> None:
    """Issue 19.10: a Ctrl-C (a real SIGINT) while synth waits between looks at its job wrote
    nothing; now the items the server has finished are written before synth exits."""
    items = [
        {
            "id": f"int-{i}",
            "input": f"{SENTENCES[i % 4]} Part {i}. [[fault:slow:0.6]]",  # none from the cache
            "response_format": "wav",
        }
        for i in range(8)
    ]
    manifest, out = write_manifest(tmp_path / "manifest.jsonl", items), tmp_path / "out"
    argv = [
        sys.executable,
        "-m",
        "supervisor",
        "synth",
        str(manifest),
        "--out",
        str(out),
        "--server",
        server.url,
        "--api-key",
        KEY,
        "--poll-s",
        "600",
    ]  # it looks once, then sleeps: only the interrupt can save the rest
    synth = subprocess.Popen(argv, cwd=REPO_ROOT, stderr=subprocess.PIPE, text=True)
    try:
        newest = wait_job_submitted(server, "int-0")
        finished = wait_job(
            server, newest, lambda j: j["progress"]["done"] >= 4, 120, "a first batch to finish"
        )
        synth.send_signal(signal.SIGINT)
        _, stderr = synth.communicate(timeout=60)
    finally:
        if synth.poll() is None:
            synth.kill()
        server.request(
            "DELETE", f"/v1/jobs/{newest}"
        )  # the rest of it would only slow the next tests
    assert synth.returncode == 3 and "run the same command again to resume" in stderr, stderr
    written = sorted(p.name for p in out.glob("int-*"))
    done = [i["id"] for i in finished["items"] if i["state"] == "done"]
    assert len(written) >= len(done) >= 4 and set(f"{d}.wav" for d in done) <= set(written), stderr
    for name in written:
        assert decoded_seconds((out / name).read_bytes(), "wav") > 0.3


def wait_job_submitted(server: LiveServer, first_id: str) -> str:
    """The id of the newest job, once its first item has the given id."""

    def newest() -> str | None:
        jobs = server.request("GET", "/v1/jobs?limit=1").json()["data"]
        if jobs and job(server, jobs[0]["id"])["items"][0]["id"] == first_id:
            return str(jobs[0]["id"])
        return None

    return wait_until(newest, 60, "synth to submit its job")


def test_synth_lists_failed_items_and_refuses_a_bad_manifest(
    server: LiveServer, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    failing = write_manifest(
        tmp_path / "failing.jsonl",
        [
            {"id": "fine", "input": SENTENCES[0], "response_format": "wav"},
            {"id": "boom", "input": "This fails. [[fault:raise]]", "response_format": "wav"},
        ],
    )
    result = run_synth(str(failing), "--out", str(out), "--server", server.url, "--api-key", KEY)
    assert (
        result.returncode == 1 and (out / "fine.wav").is_file() and not (out / "boom.wav").exists()
    )
    assert "boom (line 2): generation failed" in result.stderr, result.stderr
    unknown_voice = write_manifest(
        tmp_path / "voice.jsonl",
        [{"id": "a", "input": "x"}, {"id": "b", "input": "y", "voice": "nobody"}],
    )
    result = run_synth(
        str(unknown_voice), "--out", str(out), "--server", server.url, "--api-key", KEY
    )
    assert result.returncode == 2 and "line 2 (id b): Voice 'nobody' not found" in result.stderr, (
        result.stderr
    )
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"id": "a", "input": "x"}\n{"id": "a", "input": "y"}\nnot json\n')
    result = run_synth(str(broken), "--out", str(out), "--server", server.url, "--api-key", KEY)
    assert (
        result.returncode == 2
        and "broken.jsonl:2:" in result.stderr
        and "broken.jsonl:3: not JSON" in result.stderr
    )


def test_synth_after_the_server_was_killed_halfway_does_only_the_rest(
    checkpoint_dir: Path, tmp_path: Path
) -> None:
    """The trial from issue 7: 20 items, SIGKILL of the server halfway, a second run after the restart."""
    # Twenty different texts: repeated lines would be answered from the result cache at once.
    items = [
        {
            "id": f"clip-{i:02d}",
            "input": f"{SENTENCES[i % 4]} Clip {i}.",
            "response_format": FORMATS[i % 4],
        }
        for i in range(20)
    ]
    manifest, out = write_manifest(tmp_path / "manifest.jsonl", items), tmp_path / "out"
    flags = ("--max-batch-size", "2")
    with live(tmp_path, *flags, checkpoint=checkpoint_dir) as server:
        argv = [str(manifest), "--out", str(out), "--server", server.url, "--api-key", KEY]
        argv += ["--poll-s", "0.2", "--retry-s", "2"]
        code, stderr, sidecars = synth_cut_by_a_server_kill(
            server, argv, lambda: len(list(out.glob("clip-*"))) >= 8, "making eight clips"
        )
        assert code == 3 and "run the same command again to resume" in stderr, stderr
        wait_gone(sidecars)
    kept = {p.name: p.stat().st_mtime_ns for p in out.glob("clip-*")}
    assert 8 <= len(kept) < 20
    with live(tmp_path, *flags, checkpoint=checkpoint_dir) as server:
        second = run_synth(
            str(manifest),
            "--out",
            str(out),
            "--server",
            server.url,
            "--api-key",
            KEY,
            "--poll-s",
            "0.2",
        )
        assert second.returncode == 0, second.stderr
        assert (
            f"{len(kept)} already in" in second.stderr
            and f"{20 - len(kept)} written" in second.stderr
        )
        assert (
            "following" in second.stderr and job_count(server) == 1
        )  # the same job, resumed by the restarted server
        final = job(server, server.request("GET", "/v1/jobs").json()["data"][0]["id"])
    assert final["state"] == "completed" and all(i["attempts"] <= 2 for i in final["items"])
    for name, mtime in kept.items():
        assert (out / name).stat().st_mtime_ns == mtime  # never written again
    for path in out.glob("clip-*"):
        assert decoded_seconds(path.read_bytes(), path.suffix[1:]) > 0.3
    assert len(list(out.glob("clip-*"))) == 20


def test_synth_with_a_model_starts_and_stops_its_own_server(
    checkpoint_dir: Path, tmp_path: Path
) -> None:
    manifest = write_manifest(
        tmp_path / "m.jsonl",
        [{"id": f"a{i}", "input": SENTENCES[i], "response_format": "wav"} for i in range(3)],
    )
    out = tmp_path / "out"
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "OMNIVOICE_NUM_STEP": "4",
        "OMNIVOICE_WARMUP_STEPS": "1",
    }
    result = run_synth(str(manifest), "--out", str(out), "--model", str(checkpoint_dir), env=env)
    assert result.returncode == 0, (
        result.stderr + (out / ".synth-server" / "server.log").read_text()[-3000:]
    )
    assert "starting a server for this run" in result.stderr
    assert sorted(p.name for p in out.glob("a*")) == ["a0.wav", "a1.wav", "a2.wav"]
    log = (out / ".synth-server" / "server.log").read_text()
    assert "pool stopped" in log  # it was asked to stop and did
    again = run_synth(str(manifest), "--out", str(out), "--model", str(checkpoint_dir), env=env)
    assert (
        again.returncode == 0 and "starting a server" not in again.stderr
    )  # nothing to do: no server started


def item_states(store: Path) -> dict[str, int]:
    """The items' states in a job store, read beside the server that writes it."""
    if not store.exists():
        return {}
    with contextlib.closing(sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=5)) as db:
        try:
            return dict(db.execute("SELECT state, COUNT(*) FROM items GROUP BY state").fetchall())
        except sqlite3.OperationalError:  # created, its tables not yet
            return {}


def test_synth_with_a_model_interrupted_makes_nothing_twice(
    checkpoint_dir: Path, tmp_path: Path
) -> None:
    """Issue 37.2: a Ctrl-C (a real SIGINT) to `synth --model` while items run: its server
    drains, so the items a sidecar has begun are finished and written, the rest go back
    untouched; the rerun makes only those, and every item ends with one attempt. The server is
    synth's own (`python -m supervisor serve`, no test faults): sixteen steps an item keep the
    items running long enough for the interrupt to find some begun and some waiting."""
    items = [
        {"id": f"c{i}", "input": f"{SENTENCES[i % 4]} Clip {i}.", "response_format": "wav"}
        for i in range(10)
    ]
    manifest, out = write_manifest(tmp_path / "m.jsonl", items), tmp_path / "out"
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "OMNIVOICE_NUM_STEP": "16",
        "OMNIVOICE_WARMUP_STEPS": "1",
        "OMNIVOICE_MAX_BATCH_SIZE": "2",
    }
    argv = [
        sys.executable,
        "-m",
        "supervisor",
        "synth",
        str(manifest),
        "--out",
        str(out),
        "--model",
        str(checkpoint_dir),
    ]
    store = out / ".synth-server" / "jobs.sqlite3"
    synth = subprocess.Popen(argv, cwd=REPO_ROOT, stderr=subprocess.PIPE, text=True, env=env)
    try:

        def two_done_one_running() -> bool:
            assert synth.poll() is None, "synth exited before its items ran"
            states = item_states(store)
            return states.get("done", 0) >= 2 and bool(states.get("running"))

        wait_until(two_done_one_running, 120, "two items done and one running")
        synth.send_signal(signal.SIGINT)
        _, stderr = synth.communicate(timeout=120)
    finally:
        if synth.poll() is None:
            synth.kill()
    assert synth.returncode == 3 and "run the same command again to resume" in stderr, stderr
    states = item_states(store)
    assert "running" not in states and states.get("queued"), states
    again = run_synth(str(manifest), "--out", str(out), "--model", str(checkpoint_dir), env=env)
    assert again.returncode == 0, again.stderr
    assert sorted(p.name for p in out.glob("c*.wav")) == sorted(f"c{i}.wav" for i in range(10))
    with contextlib.closing(sqlite3.connect(store)) as db:
        attempts = [row[0] for row in db.execute("SELECT attempts FROM items ORDER BY n")]
    assert attempts == [1] * 10, attempts  # nothing made twice
