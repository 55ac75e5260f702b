"""The ASR round trip end to end (--asr-model): a real server, a real OmniVoice sidecar on the
tiny checkpoint and a real ASR sidecar on the tiny random Whisper (`make-checkpoint --kind
whisper`), supervised like the other, started as the docs say (no thresholds loosened). Random
Whisper weights hear noise; the checkpoint says so in its config.json, so the server warns once
and reports the round trip's checks as informational: what is tested is that every item is heard
back and its checks reported without failing it, that the ASR sidecar is supervised (a kill mid-transcription costs a
respawn, not the item), that a clone reference without a transcript is transcribed, and that
word timestamps (an `align` per caption segment) reach every route with their invariants: every
word of the segment once and in order, times ordered, not overlapping, inside the segment."""

from __future__ import annotations

import io
import itertools
import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import srt
import webvtt
from websockets.sync.client import connect

from tests.helpers.job_helpers import KEY, ended, run_synth, submit, wait_job
from tests.helpers.live_server import AUTH, LiveServer, live, tone_wav

TEXT = "Please stand clear of the closing doors."
# Two sentences: the first short enough for the tiny Whisper's 64 decoder positions (aligned by
# its cross-attention), the second longer (each word its share of the audio): both paths.
WORDS_TEXT = "Stand clear of the doors. The next train to the harbour leaves from platform four, at ten past nine tonight."


@pytest.fixture(scope="module")
def server(
    checkpoint_dir: Path, whisper_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    # A deadline past any respawn: the kill test is about the respawn, not the deadline.
    flags = (
        "--asr-model",
        str(whisper_dir),
        "--asr-timeout-s",
        "120",
    )
    with live(
        tmp_path_factory.mktemp("asr"), *flags, checkpoint=checkpoint_dir, faults=True
    ) as running:
        running.wait_for(lambda b: b["asr"][0]["state"] == "ready", 120, "the ASR sidecar")
        yield running


def asr_sidecar(server: LiveServer) -> dict[str, Any]:
    sidecar: dict[str, Any] = server.health()["asr"][0]
    return sidecar


def test_every_item_is_heard_back_and_its_round_trip_reported(server: LiveServer) -> None:
    assert asr_sidecar(server)["id"] == "asr-cpu0"
    scraped = server.request("GET", "/metrics").text
    assert 'omnivoice_sidecar_state{sidecar="asr-cpu0",state="ready"} 1.0' in scraped
    assert 'omnivoice_sidecar_restarts_total{sidecar="asr-cpu0"}' in scraped
    created = submit(server, [{"id": "a", "input": TEXT, "response_format": "wav"}])
    final = wait_job(server, created["id"], ended, 120, "the job to end")
    qa = final["items"][0]["qa"]
    assert final["items"][0]["state"] == "done" and qa["passed"] and qa["attempts"] == 1, final
    assert {"wer", "divergent_run", "finite", "speech_rate"} <= set(qa["checks"])
    assert qa["checks"]["wer"]["value"] >= 0 and qa["checks"]["divergent_run"]["value"] >= 0


def test_a_random_whisper_is_said_once_and_its_checks_never_fail_a_chunk(
    server: LiveServer,
) -> None:
    said = server.log.read_text()  # the parity fixture (--model) predates the config key
    assert said.count("has random weights") == 1, said[-3000:]
    assert "--asr-model " in said and "are informational" in said
    answer = server.request(
        "POST", "/v1/audio/speech", json={"input": TEXT, "response_format": "wav", "seed": 3}
    )
    assert answer.status_code == 200, answer.text
    assert answer.headers["X-OmniVoice-QA"] == "passed; attempts=1"
    created = submit(server, [{"id": "b", "input": TEXT, "response_format": "wav"}])
    qa = wait_job(server, created["id"], ended, 120, "the job to end")["items"][0]["qa"]
    # Noise heard back: the default max_wer (0.3) fails it, and the check says so, informing.
    assert qa["checks"]["wer"] == {
        "passed": False,
        "value": qa["checks"]["wer"]["value"],
        "informational": True,
    }
    assert qa["passed"] and qa["attempts"] == 1
    assert "informational" not in qa["checks"]["finite"]


def test_killed_mid_transcription_it_is_respawned_and_the_request_completes(
    server: LiveServer,
) -> None:
    before = asr_sidecar(server)
    answers: list[httpx.Response] = []
    # `slow` stalls the OmniVoice step loop and then the transcription, 4 s each.
    body = {"input": f"{TEXT} [[fault:slow:4]]", "response_format": "wav"}
    asking = threading.Thread(
        target=lambda: answers.append(server.request("POST", "/v1/audio/speech", json=body))
    )
    asking.start()
    busy = server.wait_for(lambda b: b["asr"][0]["state"] == "busy", 60, "a transcription")
    os.kill(busy["asr"][0]["pid"], signal.SIGKILL)
    asking.join(180)
    assert answers and answers[0].status_code == 200, answers and answers[0].text
    assert answers[0].headers["X-OmniVoice-QA"] == "passed; attempts=1"
    after = asr_sidecar(server)
    assert after["restarts"] == before["restarts"] + 1
    assert after["kills"].get("exited", 0) == before["kills"].get("exited", 0) + 1
    assert after["pid"] != busy["asr"][0]["pid"]


def test_a_clone_reference_without_a_transcript_is_transcribed_and_used(
    server: LiveServer,
) -> None:
    clip = {"file": ("ref.wav", tone_wav(2.0), "audio/wav")}
    form = {"input": TEXT, "response_format": "wav", "seed": "4"}
    cloned = server.request("POST", "/v1/audio/clone", data=form, files=clip)
    assert cloned.status_code == 200, cloned.text
    saved = server.request(
        "POST", "/v1/audio/voices", data={"name": "heard"}, files={"audio_sample": clip["file"]}
    )
    assert saved.status_code == 201, saved.text
    heard = saved.json()["transcript"]
    assert isinstance(heard, str) and heard.strip() == heard and heard
    # What the ASR sidecar heard is the voice's transcript: the same clone with it spelled out
    # gives the same audio as the clone that left it out.
    spelled = server.request(
        "POST", "/v1/audio/clone", data={**form, "transcript": heard}, files=clip
    )
    assert spelled.status_code == 200 and spelled.content == cloned.content


def assert_words_hold(segments: list[dict[str, Any]]) -> list[tuple[float, float, str]]:
    """Every word of each segment once, in order, start < end, ordered, inside the segment."""
    cues: list[tuple[float, float, str]] = []
    for segment in segments:
        timed = segment["words"]
        assert [w["word"] for w in timed] == segment["text"].split(), segment
        for w in timed:
            assert segment["start"] <= w["start"] < w["end"] <= segment["end"], (w, segment)
        assert all(a["end"] <= b["start"] for a, b in itertools.pairwise(timed)), timed
        cues += [(w["start"], w["end"], w["word"]) for w in timed]
    return cues


def test_captioned_word_timestamps_hold_every_word_in_order_inside_its_segment(
    server: LiveServer,
) -> None:
    body = {
        "input": WORDS_TEXT,
        "response_format": "wav",
        "seed": 3,
        "timestamp_granularities": ["segment", "word"],
    }
    answer = server.request("POST", "/v1/audio/speech/captioned", json=body)
    assert answer.status_code == 200, answer.text
    segments = answer.json()["segments"]
    assert len(segments) == 2
    cues = assert_words_hold(segments)  # one time line: in order across the segments too
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(cues)), cues
    plain = server.request(
        "POST", "/v1/audio/speech/captioned", json={**body, "timestamp_granularities": ["segment"]}
    )
    assert plain.status_code == 200 and "words" not in plain.json()["segments"][0]
    # The same audio either way: word timing reads the audio, it does not change it.
    assert plain.json()["audio"] == answer.json()["audio"]


def test_job_and_synth_captions_have_a_cue_per_word(server: LiveServer, tmp_path: Path) -> None:
    item = {
        "id": "words",
        "input": WORDS_TEXT,
        "response_format": "wav",
        "seed": 3,
        "captions": True,
        "timestamp_granularities": ["word"],
    }
    refused = server.request("POST", "/v1/jobs", json={"items": [{**item, "captions": False}]})
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["param"].endswith("timestamp_granularities")
    job = submit(server, [item])
    done = wait_job(server, job["id"], ended, 300, "the job to end")
    assert done["state"] == "completed", done
    base = f"/v1/jobs/{job['id']}/items/0"
    cues = list(srt.parse(server.request("GET", f"{base}/captions.srt").text))
    assert [c.content for c in cues] == WORDS_TEXT.split()
    times = [(c.start.total_seconds(), c.end.total_seconds()) for c in cues]
    assert all(s <= e for s, e in times) and all(a[1] <= b[0] for a, b in itertools.pairwise(times))
    web = webvtt.from_buffer(io.StringIO(server.request("GET", f"{base}/captions.vtt").text))
    assert [c.text for c in web.captions] == WORDS_TEXT.split()
    # synth sends the manifest's items as a job's: the same cues beside its audio.
    manifest = tmp_path / "words.jsonl"
    manifest.write_text(json.dumps(item) + "\n")
    ran = run_synth(
        str(manifest), "--out", str(tmp_path / "out"), "--server", server.url, "--api-key", KEY
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    written = list(srt.parse((tmp_path / "out" / "words.srt").read_text()))
    assert [(c.content, c.start, c.end) for c in written] == [
        (c.content, c.start, c.end) for c in cues
    ]
    assert [c.text for c in webvtt.read(str(tmp_path / "out" / "words.vtt")).captions] == (
        WORDS_TEXT.split()
    )


def test_a_websocket_session_asking_for_words_gets_them_in_each_audio_done(
    server: LiveServer,
) -> None:
    url = server.url.replace("http://", "ws://") + "/v1/audio/speech/stream"
    with connect(url, additional_headers=AUTH, open_timeout=30) as ws:
        config = {
            "type": "session.config",
            "response_format": "pcm",
            "seed": 3,
            "timestamp_granularities": ["word"],
        }
        ws.send(json.dumps(config))
        ws.send(json.dumps({"type": "input.text", "text": WORDS_TEXT}))
        ws.send(json.dumps({"type": "input.done"}))
        done, audio, sentences = [], 0, {}
        while True:
            got = ws.recv(timeout=120)
            if isinstance(got, bytes):
                audio += len(got)
                continue
            event = json.loads(got)
            if event["type"] == "audio.start":
                sentences[event["sentence_index"]] = event["sentence_text"]
            if event["type"] == "audio.done":
                assert event["error"] is None, event
                seconds = audio / 2 / event.get("sample_rate", 24000)
                done.append(
                    {
                        "text": sentences[event["sentence_index"]],
                        "start": 0.0,
                        "end": seconds,
                        "words": event["words"],
                    }
                )
                audio = 0
            if event["type"] == "session.done":
                break
    assert len(done) == 2
    assert_words_hold(done)  # each segment's words on its own audio's time line


def first_audio(server: LiveServer, config: dict[str, Any]) -> list[dict[str, Any]]:
    """A session speaking WORDS_TEXT's two sentences: for each segment, the seconds from
    input.done to its first audio and from its last audio to its audio.done, and that."""
    url = server.url.replace("http://", "ws://") + "/v1/audio/speech/stream"
    out: list[dict[str, Any]] = []
    with connect(url, additional_headers=AUTH, open_timeout=30) as ws:
        ws.send(json.dumps({"type": "session.config", "response_format": "pcm", **config}))
        ws.send(json.dumps({"type": "input.text", "text": WORDS_TEXT}))
        ws.send(json.dumps({"type": "input.done"}))
        began = last = time.monotonic()
        first: float | None = None
        while True:
            got = ws.recv(timeout=120)
            if isinstance(got, bytes):
                last = time.monotonic()
                first = last if first is None else first
                continue
            event = json.loads(got)
            if event["type"] == "error":
                pytest.fail(str(event))
            if event["type"] == "audio.done":
                assert first is not None and event["error"] is None, event
                after = time.monotonic() - last
                out.append({"first": first - began, "after": after, "done": event})
                first = None
            if event["type"] == "session.done":
                return out


def test_word_timing_holds_no_audio_back_beyond_one_alignment(server: LiveServer) -> None:
    seed = {"seed": 4, "voice": "alloy"}
    plain = first_audio(server, seed)
    timed = first_audio(server, {**seed, "timestamp_granularities": ["word"]})
    # Sent as made: the ASR round trip did not hear the chunks before they went out.
    assert all(s["done"]["qa"].endswith("asr=skipped") for s in plain + timed)
    assert all(s["done"]["words"] for s in timed)
    # A segment's first audio waits at most for the segment before it (its audio.done, which
    # carries its words), never for its own alignment or a chain of them; the slack is the
    # noise of a loaded machine.
    for k, (without, with_words) in enumerate(zip(plain, timed, strict=True)):
        before = timed[k - 1]["after"] if k else 0.0
        slack = 0.5 + 0.5 * without["first"]
        assert with_words["first"] <= without["first"] + before + slack, (k, plain, timed)
    # Asked for, the checks hold each segment until the ASR sidecar has heard it.
    held = first_audio(server, {**seed, "hold_for_checks": True})
    assert not any("asr=skipped" in s["done"]["qa"] for s in held)
