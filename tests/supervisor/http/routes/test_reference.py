"""supervisor/http/routes/reference.py: a reference clip's form read strictly (known fields, each
once, the file as a file), the clip checked (413 too large, 400 empty, 415 not audio), through
the voices route that reads it; and the containers `sniff` knows."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from supervisor.http.routes.reference import sniff
from tests.helpers.live_server import tone_wav

APP_SETTINGS = {"max_upload_mb": 0.05}  # 52 KiB: a 1 s clip fits, a 2 s one does not


def save(client: TestClient, data: dict[str, str], files: Any = None) -> tuple[int, object]:
    answer = client.post("/v1/audio/voices", data=data, files=files)
    body = answer.json()
    return answer.status_code, body["error"]["param"] if "error" in body else None


def clip(seconds: float, name: str = "file") -> dict[str, tuple[str, bytes, str]]:
    return {name: ("a.wav", tone_wav(seconds), "audio/wav")}


@pytest.mark.parametrize("field", ["file", "audio_sample"])
def test_a_clip_within_the_limit_is_taken_under_either_name(client: TestClient, field: str) -> None:
    assert save(client, {"name": f"ok-{field}", "transcript": "hi"}, clip(0.5, field)) == (
        201,
        None,
    )


def test_the_clip_is_checked(client: TestClient) -> None:
    base = {"name": "x", "transcript": "hi"}
    assert save(client, base, clip(2.0)) == (413, "file")
    assert save(client, base, {"file": ("a.wav", b"", "audio/wav")}) == (400, "file")
    assert save(client, base, {"file": ("a.txt", b"plain words", "text/plain")}) == (415, "file")


def test_the_form_is_read_strictly(client: TestClient) -> None:
    assert save(client, {"name": "x", "transcript": "hi", "colour": "red"}, clip(0.5)) == (
        400,
        "colour",
    )
    assert save(client, {"name": "x", "transcript": "hi", "file": "text, not a file"}) == (
        400,
        "file",
    )
    two = [
        ("file", ("a.wav", tone_wav(0.5), "audio/wav")),
        ("audio_sample", ("b.wav", tone_wav(0.5), "audio/wav")),
    ]
    assert save(client, {"name": "x", "transcript": "hi"}, two) == (400, "audio_sample")  # one file
    assert save(client, {"name": "x"}, {"transcript": ("t.txt", b"hi", "text/plain")}) == (
        400,
        "transcript",
    )


def test_a_body_that_is_not_a_form_is_a_415(client: TestClient) -> None:
    answer = client.post("/v1/audio/voices", json={"name": "x", "prompt": "female"})
    assert answer.status_code == 415


@pytest.mark.parametrize(
    ("head", "kind"),
    [
        (b"RIFF\0\0\0\0WAVEfmt ", "wav"),
        (b"fLaC\0\0\0\x22", "flac"),
        (b"OggS\0\x02", "ogg"),
        (b"ID3\x04\0", "mp3"),
        (b"\xff\xfb\x90\x64", "mp3"),  # an MPEG-1 layer III frame sync
        (b"\xff\xf1\x50\x80", None),  # ADTS AAC: layer 0, not ours
        (b"RIFF\0\0\0\0AVI ", None),
        (b"", None),
    ],
)
def test_sniff(head: bytes, kind: str | None) -> None:
    assert sniff(head) == kind
