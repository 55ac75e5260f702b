"""Delivery profiles over HTTP, against a live server on the tiny checkpoint (real sidecar).

`--chunk-s 2` makes the long text several chunks, so loudness is shown to be applied over the
joined output (the answer is buffered: one body with its length), and a resampled answer to
stream through one resampler. Files are read by libsndfile (soundfile) and libav (PyAV);
loudness by pyloudnorm. Targets are ones this checkpoint's sound can reach (see the ceiling test).
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import av
import numpy as np
import pyloudnorm
import pytest
import soundfile
from scipy.signal import resample_poly

from tests.helpers.live_server import LiveServer, live
from tests.helpers.texts import LONG
from tests.helpers.waits import wait_until

SHORT = "Hello from the quiet harbour."


@pytest.fixture(scope="module")
def server(checkpoint_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OMP_NUM_THREADS", "1")
        with live(
            tmp_path_factory.mktemp("delivery"), "--chunk-s", "2", checkpoint=checkpoint_dir
        ) as running:
            yield running


def speech(server: LiveServer, **fields: Any) -> Any:
    reply = server.request("POST", "/v1/audio/speech", json={"input": LONG, "seed": 7, **fields})
    assert reply.status_code == 200, reply.text
    return reply


def lufs(data: bytes) -> float:
    audio, rate = soundfile.read(io.BytesIO(data), dtype="float64")
    return float(pyloudnorm.Meter(rate).integrated_loudness(audio))


def test_loudness_of_a_chunked_answer_is_on_target(server: LiveServer) -> None:
    plain = speech(server, response_format="wav")
    assert int(plain.headers["x-chunks"]) > 1
    assert plain.headers.get("transfer-encoding") == "chunked"  # streamed as it comes
    loud = speech(server, response_format="wav", loudness={"lufs": -20})
    assert "content-length" in loud.headers  # buffered: the whole output, then one file
    assert abs(lufs(plain.content) - -20.0) > 2.0  # there was something to do
    assert abs(lufs(loud.content) - -20.0) <= 1.0
    custom = speech(server, response_format="flac", loudness={"lufs": -30, "true_peak_db": -6})
    assert abs(lufs(custom.content) - -30.0) <= 1.0


def test_the_true_peak_ceiling_wins_over_the_target(server: LiveServer) -> None:
    """The tiny random model's sound is mostly low frequencies, which K-weighting counts little:
    -16 LUFS would need peaks over -1 dBTP. The limiter holds the ceiling; the answer is as
    loud as that allows, louder than it was and not over the target."""
    plain = lufs(speech(server, response_format="wav").content)
    podcast = speech(server, response_format="wav", loudness="podcast").content
    audio, _ = soundfile.read(io.BytesIO(podcast), dtype="float64")
    assert 20 * np.log10(np.abs(resample_poly(audio, 4, 1)).max()) <= -1.0 + 0.2
    assert plain + 2.0 < lufs(podcast) <= -16.0 + 1.0


def test_loudness_over_sse_is_one_normalised_file(server: LiveServer) -> None:
    import base64
    import json

    reply = speech(server, response_format="wav", loudness={"lufs": -28}, stream_format="sse")
    events = [json.loads(line[6:]) for line in reply.text.splitlines() if line.startswith("data: ")]
    assert events[-1]["type"] == "speech.audio.done"
    data = b"".join(base64.b64decode(e["audio"]) for e in events[:-1])
    assert abs(lufs(data) - -28.0) <= 1.0


@pytest.mark.parametrize(("fmt", "subtype"), [("mulaw", "ULAW"), ("alaw", "ALAW")])
def test_g711_answers_are_8_khz_wav(server: LiveServer, fmt: str, subtype: str) -> None:
    reply = speech(server, input=SHORT, response_format=fmt)
    assert reply.headers["content-type"] == "audio/wav" and reply.headers["x-sample-rate"] == "8000"
    info = soundfile.info(io.BytesIO(reply.content))
    assert (info.samplerate, info.subtype) == (8000, subtype) and info.frames > 4000
    with av.open(io.BytesIO(reply.content)) as container:
        assert container.streams.audio[0].codec_context.name == f"pcm_{fmt}"


def test_a_streamed_answer_is_resampled_without_seams(server: LiveServer) -> None:
    """Chunks streamed at 16 kHz through one resampler: as long as the 24 kHz answer, to the
    resampler's flush, and the same seed gives the same sound."""
    native = speech(server, response_format="wav")
    low = speech(server, response_format="wav", sample_rate=16000)
    assert low.headers["x-sample-rate"] == "16000"
    assert low.headers.get("transfer-encoding") == "chunked"
    a, rate_a = soundfile.read(io.BytesIO(native.content))
    b, rate_b = soundfile.read(io.BytesIO(low.content))
    assert (rate_a, rate_b) == (24000, 16000)
    assert abs(len(b) - len(a) * 2 / 3) <= 32


def test_a_job_item_gets_its_profile(server: LiveServer) -> None:
    items = [
        # At 8 kHz this checkpoint's sound (much of it at 4 and 12 kHz) is too quiet for its
        # peaks to reach -28 LUFS; at 16 kHz it can.
        {
            "id": "phone",
            "input": LONG,
            "response_format": "mulaw",
            "sample_rate": 16000,
            "loudness": {"lufs": -28},
        },
        {"id": "hifi", "input": SHORT, "response_format": "flac", "sample_rate": 44100},
        {"id": "alaw", "input": SHORT, "response_format": "alaw"},
    ]
    job = server.request("POST", "/v1/jobs", json={"items": items}).json()
    job = wait_until(
        lambda: (
            (got := server.request("GET", f"/v1/jobs/{job['id']}").json())["state"]
            in ("completed", "failed")
            and got
        ),
        300,
        "the job to end",
    )
    assert job["state"] == "completed", job
    phone = server.request("GET", job["items"][0]["audio_url"]).content
    info = soundfile.info(io.BytesIO(phone))
    assert (info.samplerate, info.subtype) == (16000, "ULAW")
    assert abs(lufs(phone) - -28.0) <= 1.0
    hifi = server.request("GET", job["items"][1]["audio_url"]).content
    assert soundfile.info(io.BytesIO(hifi)).samplerate == 44100
    alaw = soundfile.info(io.BytesIO(server.request("GET", job["items"][2]["audio_url"]).content))
    assert (alaw.samplerate, alaw.subtype) == (8000, "ALAW")


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"sample_rate": 4000}, "sample_rate"),
        ({"sample_rate": 22050, "response_format": "opus"}, "sample_rate"),
        ({"loudness": "very"}, "loudness"),
        ({"loudness": {"lufs": -16, "true_peak_db": 3}}, "loudness"),
    ],
)
def test_bad_values_are_400s_in_openai_shape(
    server: LiveServer, fields: dict[str, Any], param: str
) -> None:
    reply = server.request("POST", "/v1/audio/speech", json={"input": SHORT, **fields})
    assert reply.status_code == 400
    error = reply.json()["error"]
    assert error["param"] == param and error["type"] == "invalid_request_error" and error["message"]
    job = server.request("POST", "/v1/jobs", json={"items": [{"input": SHORT, **fields}]})
    assert job.status_code == 400 and param in job.json()["error"]["param"]
