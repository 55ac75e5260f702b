"""The HTTP API through the official `openai` client, against a live server on the tiny checkpoint.

One server (real sidecar, `--chunk-s 2` so that a few sentences already make several chunks)
serves the whole module. Every audio answer is decoded by libav (PyAV) to the end and checked
for its sample rate and a plausible length.
"""

from __future__ import annotations

import base64
import io
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import av
import openai
import pytest

from supervisor.speech.text.chunking import estimate_s
from tests.helpers.live_server import KEY, LiveServer, live, tone_wav
from tests.helpers.texts import LONG

SHORT = "Hello from the quiet harbour."
RATE = 24000


@pytest.fixture(scope="module")
def server(checkpoint_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OMP_NUM_THREADS", "1")
        with live(
            tmp_path_factory.mktemp("api"),
            "--chunk-s",
            "2",
            checkpoint=checkpoint_dir,
            faults=True,
        ) as running:
            yield running


@pytest.fixture(scope="module")
def client(server: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0, timeout=120)


def decode(data: bytes, fmt: str = "") -> tuple[int, float]:
    """(sample rate, seconds) of a whole file as libav decodes it; raw pcm is s16le at 24 kHz."""
    if fmt == "pcm":
        return RATE, len(data) / 2 / RATE
    with av.open(io.BytesIO(data)) as container:
        stream = container.streams.audio[0]
        samples = sum(frame.samples for frame in container.decode(stream))
        return stream.codec_context.sample_rate, samples / stream.codec_context.sample_rate


def plausible(seconds: float, text: str) -> bool:
    """About the duration rule's estimate: silence trimming takes some away, fades and pads add 0.2 s per chunk."""
    expected = estimate_s(text)
    return 0.4 * expected < seconds < 2.0 * expected + 1.0


# ---------------------------------------------------------------- speech


@pytest.mark.parametrize(
    ("fmt", "rate", "media_type"),
    [
        ("mp3", RATE, "audio/mpeg"),
        ("opus", 48000, "audio/opus"),
        ("aac", RATE, "audio/aac"),
        ("flac", RATE, "audio/flac"),
        ("wav", RATE, "audio/wav"),
        ("pcm", RATE, "audio/pcm"),
    ],
)
def test_speech_in_every_format(
    client: openai.OpenAI, fmt: str, rate: int, media_type: str
) -> None:
    reply = client.audio.speech.with_raw_response.create(
        model="tts-1", voice="alloy", input=SHORT, response_format=fmt
    )  # type: ignore[arg-type]
    assert reply.headers["content-type"] == media_type and reply.headers["x-chunks"] == "1"
    decoded_rate, seconds = decode(reply.content, fmt)
    assert decoded_rate == rate and plausible(seconds, SHORT)


def test_seed_reproduces_and_openai_voices_are_stable(client: openai.OpenAI) -> None:
    first = client.audio.speech.create(
        model="omnivoice", voice="onyx", input=SHORT, response_format="pcm"
    )
    again = client.audio.speech.create(
        model="omnivoice", voice="onyx", input=SHORT, response_format="pcm"
    )
    assert first.content == again.content  # a named voice has a fixed default seed
    seeded = client.audio.speech.with_raw_response.create(
        model="omnivoice", voice="auto", input=SHORT, response_format="pcm"
    )
    seed = int(seeded.headers["x-seed"])
    replay = client.audio.speech.create(
        model="omnivoice",
        voice="auto",
        input=SHORT,
        response_format="pcm",
        extra_body={"seed": seed},
    )
    assert replay.content == seeded.content


def test_extensions_are_honoured(client: openai.OpenAI) -> None:
    reply = client.audio.speech.create(
        model="gpt-4o-mini-tts",
        voice="auto",
        input=SHORT,
        response_format="wav",
        speed=1.0,
        extra_body={
            "duration": 3.0,
            "language": "English",
            "num_step": 2,
            "guidance_scale": 1.5,
            "denoise": False,
            "seed": 3,
        },
    )
    rate, seconds = decode(reply.content)
    assert rate == RATE and 2.0 < seconds < 3.5  # asked for 3 s (silence trimming may shorten it)


def test_design_via_instructions(client: openai.OpenAI) -> None:
    reply = client.audio.speech.create(
        model="gpt-4o-mini-tts",
        voice="coral",
        input=SHORT,
        instructions="male, british accent",
        response_format="flac",
    )
    assert plausible(decode(reply.content)[1], SHORT)
    # Issue 19.4: gpt-4o-mini-tts prose is not a 400; the items it names are used, and a header says so.
    prose = "Speak as a woman with a low pitch. Be cheerful and positive."
    with client.audio.speech.with_streaming_response.create(
        model="gpt-4o-mini-tts",
        voice="coral",
        input=SHORT,
        instructions=prose,
        response_format="wav",
    ) as reply:
        assert (
            reply.headers["X-OmniVoice-Instructions"]
            == "used=female,low pitch; ignored=Be cheerful and positive."
        )
        assert plausible(decode(reply.read())[1], SHORT)


@pytest.mark.parametrize("fmt", ["mp3", "wav", "opus"])
def test_long_input_streams_chunk_by_chunk_and_decodes_to_the_end(
    client: openai.OpenAI, fmt: str
) -> None:
    arrivals = []
    with client.audio.speech.with_streaming_response.create(
        model="tts-1", voice="nova", input=LONG, response_format=fmt
    ) as reply:  # type: ignore[arg-type]
        assert (
            reply.headers.get("transfer-encoding") == "chunked"
            and int(reply.headers["x-chunks"]) >= 3
        )
        data = b""
        for part in reply.iter_bytes():
            arrivals.append(time.monotonic())
            data += part
    rate, seconds = decode(data)
    assert rate == (48000 if fmt == "opus" else RATE) and plausible(seconds, LONG)


@pytest.mark.parametrize("mode", ["concurrent", "sequential", "none"])
def test_chunk_modes(client: openai.OpenAI, mode: str) -> None:
    reply = client.audio.speech.with_raw_response.create(
        model="tts-1",
        voice="auto",
        input=LONG,
        response_format="wav",
        extra_body={"chunk_mode": mode},
    )
    assert (reply.headers["x-chunks"] == "1") == (mode == "none")
    assert plausible(decode(reply.content)[1], LONG)


def sse_events(client: openai.OpenAI, **fields: Any) -> list[dict[str, Any]]:
    events = []
    with client.audio.speech.with_streaming_response.create(
        model="tts-1", voice="alloy", stream_format="sse", **fields
    ) as reply:
        assert reply.headers["content-type"].startswith("text/event-stream")
        for line in reply.iter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line[len("data: ") :]))
    return events


def test_sse_sends_deltas_then_done_with_usage(client: openai.OpenAI) -> None:
    events = sse_events(client, input=LONG, response_format="pcm")
    assert {e["type"] for e in events[:-1]} == {"speech.audio.delta"} and events[-1][
        "type"
    ] == "speech.audio.done"
    pcm = b"".join(base64.b64decode(e["audio"]) for e in events[:-1])
    assert len(events) >= 4 and plausible(len(pcm) / 2 / RATE, LONG)
    usage = events[-1]["usage"]
    assert (
        usage["output_tokens"] == round(len(pcm) / 2 / RATE * 25)
        and usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    )


def test_sse_in_a_compressed_format(client: openai.OpenAI) -> None:
    events = sse_events(client, input=SHORT, response_format="mp3")
    mp3 = b"".join(
        base64.b64decode(e["audio"]) for e in events if e["type"] == "speech.audio.delta"
    )
    assert decode(mp3)[0] == RATE


def test_a_client_that_goes_away_cancels_its_remaining_chunks(
    server: LiveServer, client: openai.OpenAI
) -> None:
    slow = " ".join(f"Sentence number {i} takes its time. [[fault:slow:1]]" for i in range(8))
    started = time.monotonic()
    with client.audio.speech.with_streaming_response.create(
        model="tts-1",
        voice="auto",
        input=slow,
        response_format="pcm",
        extra_body={"chunk_mode": "sequential"},
    ) as reply:
        assert int(reply.headers["x-chunks"]) >= 6
        next(reply.iter_bytes())  # the first chunk, then hang up
    server.wait_for(
        lambda b: b["queue"]["tasks"] == 0 and b["queue"]["reservations"] == 0,
        4,
        "the request's work to be cancelled",
    )
    assert time.monotonic() - started < 6  # the whole request would take 6 s or more


# ---------------------------------------------------------------- voices


def test_a_saved_voice_end_to_end(server: LiveServer, client: openai.OpenAI) -> None:
    created = client.audio.voices.create(
        name="harbour-narrator",
        audio_sample=("ref.wav", tone_wav(2.0), "audio/wav"),
        consent="cons_local",
        extra_body={"transcript": "A steady tone for two seconds."},
    )
    assert (created.id, created.type, created.object) == (
        "harbour-narrator",
        "audio_sample",
        "audio.voice",
    )
    listed = server.request("GET", "/v1/audio/voices").json()["data"]
    assert any(v["id"] == "harbour-narrator" and v["duration_s"] > 1 for v in listed) and any(
        v["id"] == "alloy" for v in listed
    )
    by_name = client.audio.speech.create(
        model="tts-1", voice="harbour-narrator", input=SHORT, response_format="wav"
    )
    by_id = client.audio.speech.create(
        model="tts-1",
        voice={"id": "harbour-narrator"},
        input=SHORT,
        response_format="wav",
        extra_body={"seed": 1},
    )
    assert plausible(decode(by_name.content)[1], SHORT) and plausible(
        decode(by_id.content)[1], SHORT
    )
    with pytest.raises(openai.ConflictError):
        client.audio.voices.create(
            name="harbour-narrator",
            audio_sample=("ref.wav", tone_wav(1.0), "audio/wav"),
            consent="cons_local",
            extra_body={"transcript": "Again."},
        )
    deleted = client.audio.voices.delete("harbour-narrator")
    assert deleted.deleted and deleted.id == "harbour-narrator"
    with pytest.raises(openai.BadRequestError) as caught:
        client.audio.speech.create(model="tts-1", voice="harbour-narrator", input=SHORT)
    assert caught.value.code == "voice_not_found"
    with pytest.raises(openai.NotFoundError):
        client.audio.voices.delete("harbour-narrator")


def test_a_saved_designed_voice(client: openai.OpenAI) -> None:
    created = client.audio.voices.create(
        name="deep", type="prompt", prompt="male, elderly, very low pitch"
    )
    assert created.type == "prompt" and created.prompt == "male, elderly, very low pitch"
    first = client.audio.speech.create(
        model="tts-1", voice="deep", input=SHORT, response_format="pcm"
    )
    assert (
        first.content
        == client.audio.speech.create(
            model="tts-1", voice="deep", input=SHORT, response_format="pcm"
        ).content
    )
    client.audio.voices.delete("deep")


def test_one_shot_clone_and_design_forms(server: LiveServer) -> None:
    files = {"file": ("ref.flac", tone_wav(1.5), "audio/wav")}
    form = {
        "input": SHORT,
        "transcript": "A steady tone, a second and a half.",
        "response_format": "mp3",
        "seed": "4",
    }
    cloned = server.request("POST", "/v1/audio/clone", data=form, files=files)
    assert (
        cloned.status_code == 200
        and cloned.headers["content-type"] == "audio/mpeg"
        and plausible(decode(cloned.content)[1], SHORT)
    )
    again = server.request(
        "POST", "/v1/audio/clone", data=form, files=files
    )  # the prompt comes from the cache now
    assert again.content == cloned.content
    designed = server.request(
        "POST",
        "/v1/audio/design",
        data={"input": SHORT, "instructions": "female, whisper", "response_format": "wav"},
    )
    assert designed.status_code == 200 and plausible(decode(designed.content)[1], SHORT)
    as_json = server.request(
        "POST",
        "/v1/audio/design",
        json={"input": SHORT, "instructions": "child", "response_format": "aac"},
    )
    assert as_json.status_code == 200 and decode(as_json.content)[0] == RATE


# ---------------------------------------------------------------- the rest of the surface


def test_models(client: openai.OpenAI) -> None:
    assert [m.id for m in client.models.list()] == [
        "omnivoice",
        "tts-1",
        "tts-1-hd",
        "gpt-4o-mini-tts",
    ]
    assert client.models.retrieve("tts-1-hd").owned_by == "omnivoice-supervisor"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("whisper-1")


def test_keys_are_required_except_for_health_and_ready(server: LiveServer) -> None:
    for path in ("/health", "/ready"):
        assert server.request("GET", path, auth=False).status_code == 200
    for method, path in (
        ("GET", "/v1/models"),
        ("GET", "/metrics"),
        ("GET", "/openapi.json"),
        ("POST", "/v1/audio/speech"),
    ):
        refused = server.request(method, path, auth=False)
        assert refused.status_code == 401 and refused.json()["error"]["code"] == "invalid_api_key"
    wrong = openai.OpenAI(base_url=server.url + "/v1", api_key="sk-wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        wrong.audio.speech.create(model="tts-1", voice="alloy", input=SHORT)


def test_metrics_after_traffic(server: LiveServer, client: openai.OpenAI) -> None:
    client.audio.speech.create(model="tts-1", voice="alloy", input=SHORT, response_format="pcm")
    text = server.request("GET", "/metrics").text
    for name in (
        'omnivoice_http_requests_total{method="POST",route="/v1/audio/speech",status="200"}',
        "omnivoice_http_request_duration_seconds_bucket",
        "omnivoice_queue_wait_seconds_bucket",
        "omnivoice_batch_size_bucket",
        "omnivoice_batch_step_seconds_bucket",
        "omnivoice_event_loop_lag_seconds_bucket",
        "omnivoice_audio_produced_seconds_total",
        'omnivoice_sidecar_state{sidecar="cpu0",state="ready"} 1.0',
        'omnivoice_sidecar_restarts_total{sidecar="cpu0"} 0.0',
        "omnivoice_queue_depth",
        "omnivoice_time_to_first_audio_seconds_bucket",
        "process_resident_memory_bytes",
    ):
        assert name in text, name


def test_openapi_document(server: LiveServer) -> None:
    doc = server.request("GET", "/openapi.json").json()
    assert doc["openapi"].startswith("3.1") and {
        "/v1/audio/speech",
        "/v1/audio/voices",
        "/v1/models",
        "/v1/jobs",
    } <= set(doc["paths"])
    assert doc["components"]["schemas"]["CreateSpeechRequest"]["additionalProperties"] is False


def test_metrics_add_up_the_runtime_forward_passes(
    server: LiveServer, client: openai.OpenAI
) -> None:
    def counters() -> dict[str, float]:
        out = {}
        for line in server.request("GET", "/metrics").text.splitlines():
            name, _, value = line.rpartition(" ")
            if name in (
                "omnivoice_forward_passes_total",
                "omnivoice_forward_useful_flops_total",
                "omnivoice_forward_seconds_total",
                "omnivoice_tokens_real_total",
                "omnivoice_tokens_padded_total",
                "omnivoice_denoise_seconds_total",
                "omnivoice_decode_seconds_total",
                "omnivoice_denoise_device_seconds_total",
                "omnivoice_denoise_gap_seconds_total",
                "omnivoice_sidecar_wait_seconds_total",
                "omnivoice_decode_codec_seconds_total",
                "omnivoice_decode_postprocess_seconds_total",
                "omnivoice_decode_send_seconds_total",
            ):
                out[name] = float(value)
        return out

    before = counters()
    client.audio.speech.create(
        model="tts-1", voice="alloy", input=SHORT, response_format="pcm", extra_body={"num_step": 4}
    )
    after = counters()
    assert after["omnivoice_forward_passes_total"] - before["omnivoice_forward_passes_total"] == 4
    assert (
        after["omnivoice_forward_useful_flops_total"]
        > before["omnivoice_forward_useful_flops_total"]
    )
    assert after["omnivoice_forward_seconds_total"] > before["omnivoice_forward_seconds_total"]
    # The sidecar's wall time denoising holds its forward passes; decoding is timed apart.
    denoise = after["omnivoice_denoise_seconds_total"] - before["omnivoice_denoise_seconds_total"]
    assert (
        denoise
        >= after["omnivoice_forward_seconds_total"] - before["omnivoice_forward_seconds_total"]
    )
    decode = after["omnivoice_decode_seconds_total"] - before["omnivoice_decode_seconds_total"]
    assert decode > 0
    # The finisher's parts (codec, post-processing, sending) each took time, within its whole.
    parts = [
        after[name] - before[name]
        for name in (
            "omnivoice_decode_codec_seconds_total",
            "omnivoice_decode_postprocess_seconds_total",
            "omnivoice_decode_send_seconds_total",
        )
    ]
    assert all(part > 0 for part in parts), parts
    assert sum(parts) <= decode
    # The batch timed on the device (the host's clock on the CPU) holds its forward passes too;
    # the gap counter is there, and never goes back.
    batch = (
        after["omnivoice_denoise_device_seconds_total"]
        - before["omnivoice_denoise_device_seconds_total"]
    )
    assert (
        batch
        >= after["omnivoice_forward_seconds_total"] - before["omnivoice_forward_seconds_total"]
    )
    assert (
        after["omnivoice_denoise_gap_seconds_total"]
        >= before["omnivoice_denoise_gap_seconds_total"]
    )
    # The idle sidecar waited for this request's batch to arrive.
    assert (
        after["omnivoice_sidecar_wait_seconds_total"]
        > before["omnivoice_sidecar_wait_seconds_total"]
    )
    # No CUDA graphs on the CPU: nothing is padded.
    assert (
        after["omnivoice_tokens_padded_total"] - before["omnivoice_tokens_padded_total"]
        == after["omnivoice_tokens_real_total"] - before["omnivoice_tokens_real_total"]
    )
