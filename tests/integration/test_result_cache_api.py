"""The result cache over HTTP and through `synth`, against a live server on the tiny checkpoint.

What was generated is read from `/metrics`: the cache's hits and misses, and the tasks sent to
sidecars (`omnivoice_batch_size_sum`, one task per single-chunk item), so "nothing generated"
is shown by the server's own counters, not by timing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.job_helpers import KEY, ended, run_synth, submit, wait_job
from tests.helpers.live_server import LiveServer, live
from tests.helpers.texts import LONG, SENTENCES
from tests.helpers.tmpfs import fill, mount_tmpfs

ITEMS = 200
CHANGED = (3, 50, 101, 150, 199)


@pytest.fixture(scope="module")
def server(checkpoint_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    folder = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OMP_NUM_THREADS", "1")
        with live(
            folder,
            "--chunk-s",
            "2",
            "--cache-dir",
            str(folder / "results"),
            checkpoint=checkpoint_dir,
        ) as running:
            yield running


def counters(server: LiveServer) -> dict[str, float]:
    """Cache hits and misses, and tasks sent to sidecars (summed over kinds)."""
    text = server.request("GET", "/metrics").text
    out = {"hits": 0.0, "misses": 0.0, "tasks": 0.0, "bytes": 0.0}
    names = {
        "omnivoice_result_cache_hits_total": "hits",
        "omnivoice_batch_size_sum": "tasks",
        "omnivoice_result_cache_misses_total": "misses",
        "omnivoice_result_cache_bytes": "bytes",
    }
    for line in text.splitlines():
        match = re.fullmatch(r"([a-z_]+)(\{[^}]*\})? ([0-9.e+]+)", line)
        if match and match[1] in names:
            out[names[match[1]]] += float(match[3])
    return out


def speak(server: LiveServer, **fields: object) -> tuple[bytes, dict[str, str]]:
    reply = server.request("POST", "/v1/audio/speech", json={"input": SENTENCES[0], **fields})
    assert reply.status_code == 200, reply.text
    return reply.content, dict(reply.headers)


def test_a_reproducible_answer_is_served_from_the_cache(server: LiveServer) -> None:
    before = counters(server)
    first, miss = speak(server, seed=11, response_format="flac")
    assert miss["x-cache"] == "miss"
    again, hit = speak(server, seed=11, response_format="flac", model="tts-1")
    assert hit["x-cache"] == "hit" and again == first
    assert {k: hit[k] for k in ("x-seed", "x-chunks", "x-sample-rate", "content-type")} == {
        k: miss[k] for k in ("x-seed", "x-chunks", "x-sample-rate", "content-type")
    }
    after = counters(server)
    assert after["tasks"] == before["tasks"] + 1  # generated once
    assert (after["hits"] - before["hits"], after["misses"] - before["misses"]) == (1, 1)
    assert after["bytes"] > before["bytes"]
    _, headers = speak(server, seed=12, response_format="flac")  # (the tiny model's sound
    assert headers["x-cache"] == "miss"  # does not depend on the seed: only the key is compared)
    _, unseeded = speak(server, response_format="flac")
    assert "x-cache" not in unseeded  # not reproducible: never cached


def test_a_streamed_chunked_answer_is_kept_whole(server: LiveServer) -> None:
    stored = counters(server)["bytes"]
    first, miss = speak(server, input=LONG, seed=21, response_format="wav")
    assert miss["x-cache"] == "miss" and int(miss["x-chunks"]) > 1
    assert miss.get("transfer-encoding") == "chunked"
    # The entry is written after the last byte went out.
    server.wait_for(lambda _: counters(server)["bytes"] > stored, 30, "the entry to be written")
    tasks = counters(server)["tasks"]
    again, hit = speak(server, input=LONG, seed=21, response_format="wav")
    assert hit["x-cache"] == "hit" and again == first and hit["x-chunks"] == miss["x-chunks"]
    assert counters(server)["tasks"] == tasks
    # An SSE answer starts with a short chunk, so its audio is its own entry: made once, then
    # replayed as events.
    body = {"input": LONG, "seed": 21, "response_format": "wav", "stream_format": "sse"}
    stored = counters(server)["bytes"]
    made = server.request("POST", "/v1/audio/speech", json=body)
    assert made.headers["x-cache"] == "miss" and counters(server)["tasks"] > tasks
    server.wait_for(lambda _: counters(server)["bytes"] > stored, 30, "the SSE entry")
    tasks = counters(server)["tasks"]
    sse = server.request("POST", "/v1/audio/speech", json=body)
    assert sse.headers["x-cache"] == "hit"
    events = [json.loads(x[6:]) for x in sse.text.splitlines() if x.startswith("data: ")]
    assert events[-1]["type"] == "speech.audio.done" and events[-1]["usage"]["output_tokens"] > 0
    assert counters(server)["tasks"] == tasks


def test_purge_empties_the_cache_and_needs_a_key(server: LiveServer) -> None:
    speak(server, seed=31, response_format="wav")
    assert server.request("DELETE", "/v1/cache", auth=False).status_code == 401
    purged = server.request("DELETE", "/v1/cache").json()
    assert purged["object"] == "cache.purge" and purged["enabled"] and purged["deleted"] >= 1
    assert counters(server)["bytes"] == 0
    _, headers = speak(server, seed=31, response_format="wav")
    assert headers["x-cache"] == "miss"


def manifest(path: Path, changed: tuple[int, ...] = ()) -> None:
    lines = []
    for i in range(ITEMS):
        text = f"{SENTENCES[i % 4]} Number {i}."
        if i in changed:
            text = f"{SENTENCES[(i + 1) % 4]} Changed {i}."
        fmt = ("wav", "flac", "mulaw")[i % 3]
        # One chunk each (this server's --chunk-s is 2), so one item is one task.
        item = {"id": f"line-{i:03d}", "input": text, "response_format": fmt, "chunk_duration": 30}
        lines.append(json.dumps(item))
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.slow
def test_a_manifest_rerun_with_five_lines_changed_synthesises_five(
    server: LiveServer, tmp_path: Path
) -> None:
    manifest(tmp_path / "first.jsonl")
    manifest(tmp_path / "second.jsonl", CHANGED)
    common = ["--server", server.url, "--api-key", KEY, "--poll-s", "0.2"]
    start = counters(server)
    first = run_synth(
        str(tmp_path / "first.jsonl"), "--out", str(tmp_path / "a"), *common, timeout_s=900
    )
    assert first.returncode == 0, first.stderr
    middle = counters(server)
    assert middle["misses"] - start["misses"] == ITEMS  # job items have seeds: all looked up
    assert middle["tasks"] - start["tasks"] == ITEMS
    second = run_synth(str(tmp_path / "second.jsonl"), "--out", str(tmp_path / "b"), *common)
    assert second.returncode == 0, second.stderr
    end = counters(server)
    assert end["misses"] - middle["misses"] == len(CHANGED)
    assert end["hits"] - middle["hits"] == ITEMS - len(CHANGED)
    assert end["tasks"] - middle["tasks"] == len(CHANGED)  # exactly five generated
    for i in range(ITEMS):
        name = f"line-{i:03d}.{('wav', 'flac', 'mulaw')[i % 3]}"
        a, b = (tmp_path / "a" / name).read_bytes(), (tmp_path / "b" / name).read_bytes()
        assert (a == b) == (i not in CHANGED), name


def test_a_job_items_own_first_chunk_keys_apart(server: LiveServer) -> None:
    """The same seeded item with `first_chunk_s` is cut differently, so it is made, not served
    the entry of the item without it; sent again, it is served its own."""
    item = {"input": LONG, "seed": 9, "response_format": "wav"}
    runs = []
    for fields in ({}, {"first_chunk_s": 2.5}, {"first_chunk_s": 2.5}):
        before = counters(server)
        made = submit(server, [{**item, **fields}])
        body = wait_job(server, made["id"], ended, 300, "the job to end")
        assert body["state"] == "completed", body
        after = counters(server)
        runs.append((after["hits"] - before["hits"], after["misses"] - before["misses"]))
    assert runs[1] == (0, 1)  # looked up, not found: the item without it is not its entry
    assert runs[2] == (1, 0)


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    with mount_tmpfs(tmp_path / "disk", "1m") as mount:
        yield mount


def test_a_full_cache_disk_never_fails_a_request(
    checkpoint_dir: Path, tmp_path: Path, full_disk: Path
) -> None:
    with live(tmp_path, "--cache-dir", str(full_disk / "results"), checkpoint=checkpoint_dir) as s:
        fill(full_disk)
        for seed in (1, 2):
            _, headers = speak(s, seed=seed, response_format="wav")
            assert headers["x-cache"] == "miss"
        job = s.request("POST", "/v1/jobs", json={"items": [{"input": SENTENCES[1]}]}).json()
        s.wait_for(
            lambda _: s.request("GET", f"/v1/jobs/{job['id']}").json()["state"] == "completed",
            120,
            "the job item to be done",
        )
        log = s.log.read_text()
        assert log.count("result cache: cannot write") == 1  # once, not per answer
        assert not [p for p in (full_disk / "results").rglob("*") if p.is_file()]
