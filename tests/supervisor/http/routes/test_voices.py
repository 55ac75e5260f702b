"""supervisor/http/routes/voices.py: voices saved from a prompt or a reference clip, listed with
the built-in ones, read, deleted; each kind refusing the other's fields (the saved voices' use in
speech and their tenancy: tests/integration/test_voices.py, test_tenancy.py)."""

from __future__ import annotations

from starlette.testclient import TestClient

from supervisor.speech.request import schemas
from tests.helpers.live_server import tone_wav

WAV = tone_wav(1.0)


def test_a_prompt_voice_and_a_cloned_one_are_saved(client: TestClient) -> None:
    prompt = client.post("/v1/audio/voices", data={"name": "deep", "prompt": "male, low pitch"})
    assert prompt.status_code == 201, prompt.text
    assert prompt.json() | {"created_at": 0} == {
        "id": "deep",
        "object": "audio.voice",
        "name": "deep",
        "type": "prompt",
        "created_at": 0,
        "prompt": "male, low pitch",
        "deletable": True,  # as GET reads it to its maker
    }
    clip = client.post(
        "/v1/audio/voices",
        data={"name": "clip", "transcript": "hello"},
        files={"file": ("a.wav", WAV, "audio/wav")},
    )
    assert clip.status_code == 201, clip.text
    assert clip.json()["type"] == "audio_sample" and clip.json()["duration_s"] == 1.0
    assert client.get("/v1/audio/voices/clip").json()["transcript"] == "hello"


def test_the_list_starts_with_the_builtin_voices(client: TestClient) -> None:
    client.post("/v1/audio/voices", data={"name": "listed", "prompt": "female"})
    listed = client.get("/v1/audio/voices").json()["data"]
    names = [v["id"] for v in listed]
    assert names[: 1 + len(schemas.OPENAI_VOICES)] == ["auto", *schemas.OPENAI_VOICES]
    assert "listed" in names
    assert client.get("/v1/audio/voices/ALLOY").json()["builtin"] is True


def test_each_kind_refuses_the_others_fields(client: TestClient) -> None:
    prompt_with_clip = client.post(
        "/v1/audio/voices",
        data={"name": "mixed", "prompt": "female", "transcript": "hi"},
    )
    assert prompt_with_clip.status_code == 400
    assert prompt_with_clip.json()["error"]["param"] == "transcript"
    clip_with_prompt = client.post(
        "/v1/audio/voices",
        data={"name": "mixed", "type": "audio_sample", "prompt": "female"},
        files={"file": ("a.wav", WAV, "audio/wav")},
    )
    assert clip_with_prompt.json()["error"]["param"] == "prompt"
    unknown = client.post("/v1/audio/voices", data={"name": "odd", "type": "robot"})
    assert unknown.status_code == 400 and unknown.json()["error"]["param"] == "type"
    no_clip = client.post(
        "/v1/audio/voices", data={"name": "noclip", "type": "audio_sample", "transcript": "hi"}
    )
    assert no_clip.json()["error"]["param"] == "audio_sample"


def test_deleting_a_builtin_is_a_400_and_a_missing_one_a_404(client: TestClient) -> None:
    builtin = client.delete("/v1/audio/voices/alloy")
    assert builtin.status_code == 400 and builtin.json()["error"]["param"] == "name"
    client.post("/v1/audio/voices", data={"name": "gone", "prompt": "female"})
    deleted = client.delete("/v1/audio/voices/gone")
    assert deleted.json() == {"id": "gone", "object": "audio.voice.deleted", "deleted": True}
    assert client.delete("/v1/audio/voices/gone").status_code == 404
    assert client.get("/v1/audio/voices/gone").status_code == 404
