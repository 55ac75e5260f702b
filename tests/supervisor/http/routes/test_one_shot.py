"""supervisor/http/routes/one_shot.py: speech in the voice of a clip sent with the request
(/v1/audio/clone, the clip as a file or as base64 text) or in a described voice
(/v1/audio/design, a form or JSON), with omnivoice-triton-server's field names folded into ours."""

from __future__ import annotations

import base64

import pytest
from starlette.testclient import TestClient

from supervisor.errors import InvalidRequest
from supervisor.http.routes.one_shot import DESIGN_ALIASES, fold_form_aliases
from tests.helpers.live_server import tone_wav

WAV = tone_wav(0.5)


def test_clone_speaks_with_a_clip_sent_as_a_file_or_as_base64(client: TestClient) -> None:
    fields = {"input": "Hi there.", "transcript": "hello", "response_format": "wav"}
    as_file = client.post(
        "/v1/audio/clone", data=fields, files={"file": ("a.wav", WAV, "audio/wav")}
    )
    assert as_file.status_code == 200, as_file.text
    assert as_file.content[:4] == b"RIFF" and as_file.headers["content-type"] == "audio/wav"
    url = "data:audio/wav;base64," + base64.b64encode(WAV).decode()
    as_text = client.post(
        "/v1/audio/clone", data={"text": "Hi there.", "ref_text": "hello", "ref_audio_base64": url}
    )
    assert as_text.status_code == 200, as_text.text  # urlencoded: the clip is text


def test_clone_refuses_a_missing_or_doubled_or_broken_clip(client: TestClient) -> None:
    missing = client.post(
        "/v1/audio/clone", files={"input": (None, "Hi."), "transcript": (None, "hi")}
    )
    assert missing.status_code == 400 and missing.json()["error"]["param"] == "file"
    doubled = client.post(
        "/v1/audio/clone",
        data={"input": "Hi.", "ref_audio_base64": base64.b64encode(WAV).decode()},
        files={"file": ("a.wav", WAV, "audio/wav")},
    )
    assert doubled.json()["error"]["param"] == "ref_audio_base64"
    broken = client.post(
        "/v1/audio/clone", data={"input": "Hi.", "ref_audio_base64": "not base64!"}
    )
    assert broken.status_code == 400 and broken.json()["error"]["param"] == "ref_audio_base64"
    not_audio = base64.b64encode(b"just some words").decode()
    assert (
        client.post(
            "/v1/audio/clone", data={"input": "Hi.", "ref_audio_base64": not_audio}
        ).status_code
        == 415
    )


def test_clone_without_base64_takes_multipart_only(client: TestClient) -> None:
    assert client.post("/v1/audio/clone", data={"input": "Hi."}).status_code == 415
    assert client.post("/v1/audio/clone", json={"input": "Hi."}).status_code == 415


def test_design_takes_a_form_or_json_and_needs_instructions(client: TestClient) -> None:
    form = client.post("/v1/audio/design", data={"text": "Hi.", "instructions": "female"})
    spoken = client.post(
        "/v1/audio/design",
        json={"input": "Hi.", "instructions": "female", "response_format": "wav"},
    )
    assert form.status_code == 200 and spoken.status_code == 200
    assert spoken.content[:4] == b"RIFF"
    missing = client.post("/v1/audio/design", json={"input": "Hi."})
    assert missing.status_code == 400 and missing.json()["error"]["param"] == "instructions"
    voiced = client.post(
        "/v1/audio/design", json={"input": "Hi.", "instructions": "female", "voice": "alloy"}
    )
    assert voiced.status_code == 400 and voiced.json()["error"]["param"] == "voice"


def test_aliases_fold_into_our_names() -> None:
    assert fold_form_aliases({"text": "a", "ref_text": "b"}) == {"input": "a", "transcript": "b"}
    assert fold_form_aliases({"text": "a", "input": "a"}) == {"input": "a"}
    assert fold_form_aliases({"language_id": "de", "language": "en"}, DESIGN_ALIASES) == {
        "language": "en"
    }
    with pytest.raises(InvalidRequest) as refused:
        fold_form_aliases({"text": "a", "input": "b"})
    assert refused.value.param == "text"
