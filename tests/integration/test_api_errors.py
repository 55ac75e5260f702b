"""Bad input, tried systematically against a live server: each gets its status and an OpenAI-shaped error.

Wrong types, out-of-range values, empty and oversized input, broken JSON and multipart,
non-audio and unusable uploads, unknown voices, routes and methods. The upload limits are
lowered (--max-upload-mb, --max-reference-s) so that "too large" and "too long" stay small.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.live_server import LiveServer, live, tone_wav


@pytest.fixture(scope="module")
def server(checkpoint_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OMP_NUM_THREADS", "1")
        flags = ("--max-upload-mb", "0.5", "--max-reference-s", "3", "--max-input-chars", "500")
        with live(tmp_path_factory.mktemp("errors"), *flags, checkpoint=checkpoint_dir) as running:
            yield running


def assert_openai_error(
    reply: Any, status: int, param: str | None = None, code: str | None = None
) -> None:
    assert reply.status_code == status, reply.text
    error = reply.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]
    assert error["type"] == ("rate_limit_error" if status == 429 else "invalid_request_error")
    if param is not None:
        assert error["param"] == param, error
    if code is not None:
        assert error["code"] == code, error


SPEECH_CASES: list[tuple[str, Any, int, str | None]] = [
    ("unknown field", {"input": "Hi", "temperature": 0.7}, 400, "temperature"),
    ("no input", {"model": "tts-1", "voice": "alloy"}, 400, "input"),
    ("empty input", {"input": ""}, 400, "input"),
    ("blank input", {"input": " \n\t "}, 400, "input"),
    ("input too long", {"input": "x" * 501}, 400, "input"),
    ("input not a string", {"input": ["Hi"]}, 400, "input"),
    ("unknown model", {"input": "Hi", "model": "whisper-1"}, 400, "model"),
    ("model not a string", {"input": "Hi", "model": 1}, 400, "model"),
    ("unknown voice", {"input": "Hi", "voice": "nobody"}, 400, "voice"),
    ("unknown voice id", {"input": "Hi", "voice": {"id": "nobody"}}, 400, "voice"),
    (
        "voice object with extras",
        {"input": "Hi", "voice": {"id": "alloy", "style": "x"}},
        400,
        "voice",
    ),
    ("voice a number", {"input": "Hi", "voice": 7}, 400, "voice"),
    ("instructions too long", {"input": "Hi", "instructions": "male, " * 100}, 400, "instructions"),
    ("unknown format", {"input": "Hi", "response_format": "ogg"}, 400, "response_format"),
    ("unknown stream format", {"input": "Hi", "stream_format": "websocket"}, 400, "stream_format"),
    ("speed too low", {"input": "Hi", "speed": 0.1}, 400, "speed"),
    ("speed too high", {"input": "Hi", "speed": 4.01}, 400, "speed"),
    ("speed a string", {"input": "Hi", "speed": "1.0"}, 400, "speed"),
    ("speed a boolean", {"input": "Hi", "speed": True}, 400, "speed"),
    ("num_step zero", {"input": "Hi", "num_step": 0}, 400, "num_step"),
    ("num_step too many", {"input": "Hi", "num_step": 129}, 400, "num_step"),
    ("num_step a float", {"input": "Hi", "num_step": 2.5}, 400, "num_step"),
    ("negative guidance", {"input": "Hi", "guidance_scale": -0.5}, 400, "guidance_scale"),
    ("zero duration", {"input": "Hi", "duration": 0}, 400, "duration"),
    ("huge duration", {"input": "Hi", "duration": 601}, 400, "duration"),
    ("unknown chunk mode", {"input": "Hi", "chunk_mode": "parallel"}, 400, "chunk_mode"),
    ("negative seed", {"input": "Hi", "seed": -1}, 400, "seed"),
    ("seed too large", {"input": "Hi", "seed": 2**63}, 400, "seed"),
    ("denoise a string", {"input": "Hi", "denoise": "false"}, 400, "denoise"),
    ("unknown language", {"input": "Hi", "language": "Elvish"}, 400, "language"),
    ("not an object", ["Hi"], 400, None),
    ("null body", None, 400, None),
]


@pytest.mark.parametrize(
    ("body", "status", "param"), [c[1:] for c in SPEECH_CASES], ids=[c[0] for c in SPEECH_CASES]
)
def test_bad_speech_requests(server: LiveServer, body: Any, status: int, param: str | None) -> None:
    # json.dumps, not json=: httpx sends no body (and no Content-Type) for json=None
    sent = server.request(
        "POST",
        "/v1/audio/speech",
        content=json.dumps(body),
        headers={"Content-Type": "application/json"},
    )
    assert_openai_error(sent, status, param)


def test_bad_bodies(server: LiveServer) -> None:
    send = server.request
    assert_openai_error(
        send(
            "POST",
            "/v1/audio/speech",
            content=b'{"input": "Hi",',
            headers={"content-type": "application/json"},
        ),
        400,
    )
    assert_openai_error(
        send(
            "POST",
            "/v1/audio/speech",
            content=b"\xff\xfe\x00",
            headers={"content-type": "application/json"},
        ),
        400,
    )
    assert_openai_error(
        send(
            "POST",
            "/v1/audio/speech",
            content=b"[" * 100000,
            headers={"content-type": "application/json"},
        ),
        413,
    )
    deep = b"[" * 20000 + b"]" * 20000
    assert_openai_error(
        send(
            "POST", "/v1/audio/speech", content=deep, headers={"content-type": "application/json"}
        ),
        400,
    )
    assert_openai_error(send("POST", "/v1/audio/speech", json={"input": "x" * 200_000}), 413)
    assert_openai_error(send("POST", "/v1/audio/speech", files={"input": (None, "Hi")}), 415)
    # No Content-Type: a 415 (what a page on another site can send without asking first)
    no_type = send("POST", "/v1/audio/speech", content=b'{"input": "Hi", "response_format": "wav"}')
    assert_openai_error(no_type, 415, "Content-Type", "unsupported_media_type")
    assert_openai_error(send("GET", "/v1/audio/speech"), 405)
    assert_openai_error(send("GET", "/v1/audio/nothing-here"), 404)
    assert_openai_error(send("GET", "/v1/models/whisper-1"), 404, "model", "not_found")


def create(server: LiveServer, data: dict[str, Any], files: Any = None, **kw: Any) -> Any:
    return server.request("POST", "/v1/audio/voices", data=data, files=files, **kw)


GOOD = {"name": "ok-voice", "transcript": "A steady tone for two seconds."}


@pytest.mark.parametrize(
    ("data", "files", "status", "param"),
    [
        ({**GOOD, "name": "has space"}, {"file": ("a.wav", tone_wav(1.0))}, 400, "name"),
        ({**GOOD, "name": "Alloy"}, {"file": ("a.wav", tone_wav(1.0))}, 400, "name"),
        ({"transcript": "x"}, {"file": ("a.wav", tone_wav(1.0))}, 400, "name"),
        ({"name": "no-transcript"}, {"file": ("a.wav", tone_wav(1.0))}, 400, "transcript"),
        (GOOD, None, 400, "audio_sample"),
        ({**GOOD, "type": "audio_sample"}, {"other": ("a.wav", tone_wav(1.0))}, 400, "other"),
        ({**GOOD, "colour": "red"}, {"file": ("a.wav", tone_wav(1.0))}, 400, "colour"),
        ({**GOOD, "type": "cloned"}, {"file": ("a.wav", tone_wav(1.0))}, 400, "type"),
        ({**GOOD, "prompt": "male"}, {"file": ("a.wav", tone_wav(1.0))}, 400, "prompt"),
        ({"name": "designed", "type": "prompt", "prompt": "very robotic"}, None, 400, "prompt"),
        ({"name": "designed", "type": "prompt"}, None, 400, "prompt"),
        (GOOD, {"file": ("notes.txt", b"these are not audio samples at all")}, 415, "file"),
        (GOOD, {"audio_sample": ("a.png", b"\x89PNG\r\n\x1a\n" + bytes(100))}, 415, "audio_sample"),
        (GOOD, {"file": ("empty.wav", b"")}, 400, "file"),
        (GOOD, {"file": ("big.wav", tone_wav(12.0))}, 413, "file"),
        (GOOD, {"file": ("broken.wav", b"RIFF\x10\x00\x00\x00WAVEjunkjunkjunkjunk")}, 422, "file"),
        (GOOD, {"file": ("long.wav", tone_wav(4.0))}, 422, "file"),
        (GOOD, {"file": ("silent.wav", tone_wav(1.0, amplitude=0))}, 422, "file"),
    ],
)
def test_bad_voice_uploads(
    server: LiveServer, data: dict[str, Any], files: Any, status: int, param: str | None
) -> None:
    assert_openai_error(create(server, data, files), status, param)


def test_bad_forms_and_voice_routes(server: LiveServer) -> None:
    as_json = server.request("POST", "/v1/audio/voices", json=GOOD)
    assert_openai_error(as_json, 415)
    broken = server.request(
        "POST",
        "/v1/audio/voices",
        content=b'--x\r\nContent-Disposition: form-data; name="name"\r\n\r\nv\r\n--y--',
        headers={"content-type": "multipart/form-data; boundary=x"},
    )
    assert_openai_error(broken, 400)
    no_boundary = server.request(
        "POST",
        "/v1/audio/voices",
        content=b"anything",
        headers={"content-type": "multipart/form-data"},
    )
    assert_openai_error(no_boundary, 400)
    twice = create(
        server, GOOD, [("file", ("a.wav", tone_wav(1.0))), ("file", ("b.wav", tone_wav(1.0)))]
    )
    assert_openai_error(twice, 400)
    assert_openai_error(server.request("GET", "/v1/audio/voices/nobody"), 404, "name")
    assert_openai_error(server.request("DELETE", "/v1/audio/voices/nobody"), 404, "name")
    assert_openai_error(server.request("DELETE", "/v1/audio/voices/alloy"), 400, "name")
    assert server.request("GET", "/v1/audio/voices/Alloy").json()["prompt"].startswith("female")


def test_bad_one_shot_forms(server: LiveServer) -> None:
    clip = {"file": ("a.wav", tone_wav(1.0))}
    assert_openai_error(
        server.request("POST", "/v1/audio/clone", data={"input": "Hi"}, files=clip),
        400,
        "transcript",
    )
    assert_openai_error(
        server.request("POST", "/v1/audio/clone", data={"input": "Hi", "transcript": "x"}), 415
    )
    assert_openai_error(
        server.request(
            "POST",
            "/v1/audio/clone",
            data={"input": "Hi", "transcript": "x", "voice": "alloy"},
            files=clip,
        ),
        400,
        "voice",
    )
    assert_openai_error(
        server.request(
            "POST",
            "/v1/audio/clone",
            data={"input": "Hi", "transcript": "x", "speed": "fast"},
            files=clip,
        ),
        400,
        "speed",
    )
    assert_openai_error(
        server.request(
            "POST",
            "/v1/audio/clone",
            data={"input": "Hi", "transcript": "x"},
            files={"file": ("a.txt", b"text")},
        ),
        415,
        "file",
    )
    assert_openai_error(
        server.request("POST", "/v1/audio/design", data={"input": "Hi"}), 400, "instructions"
    )
    assert_openai_error(
        server.request("POST", "/v1/audio/design", data={"input": "Hi", "instructions": "goblin"}),
        400,
        "instructions",
    )
    assert_openai_error(
        server.request(
            "POST", "/v1/audio/design", json={"input": "Hi", "instructions": "male", "voice": "x"}
        ),
        400,
        "voice",
    )
    assert_openai_error(
        server.request(
            "POST", "/v1/audio/design", content=b"input=Hi", headers={"content-type": "text/plain"}
        ),
        415,
    )


def test_the_server_survived_all_of_it(server: LiveServer) -> None:
    """Self-contained (it passes alone or after the others): it sends the bad input itself."""
    pid = server.health()["sidecars"][0]["pid"]
    for _, body, status, param in SPEECH_CASES:
        test_bad_speech_requests(server, body, status, param)
    test_bad_bodies(server)
    test_bad_one_shot_forms(server)
    health = server.health()
    assert health["status"] == "ok" and health["sidecars"][0]["restarts"] == 0
    assert health["sidecars"][0]["pid"] == pid
    metrics = server.request("GET", "/metrics").text
    assert 'status="400"' in metrics and 'status="413"' in metrics  # the refusals were counted
    assert 'status="500"' not in metrics
