"""supervisor/speech/stores/voices.py: saved voices survive a restart, never half-written, never clobbered."""

from __future__ import annotations

from pathlib import Path

import pytest

from supervisor.errors import Conflict
from supervisor.speech.stores.voices import PromptCache, SavedVoice, VoiceStore

PROMPT = {
    "tokens": {"shape": [8, 50], "data": bytes(8 * 50 * 2)},
    "ref_text": "Hello there.",
    "ref_rms": 0.05,
}


def sample(name: str = "narrator") -> SavedVoice:
    return SavedVoice(
        name,
        1_700_000_000,
        "audio_sample",
        transcript="Hello there",
        voice=PROMPT,
        source={"bytes": 10},
    )


def test_voices_are_written_and_read_back(tmp_path: Path) -> None:
    store = VoiceStore(tmp_path / "voices")
    store.add(sample())
    store.add(SavedVoice("designed", 1_700_000_001, "prompt", prompt="female, low pitch", seed=42))
    again = VoiceStore(tmp_path / "voices")
    assert [v.name for v in again.list()] == ["narrator", "designed"]
    assert again.get("narrator") == store.get("narrator")
    assert again.get("narrator").public() == {  # type: ignore[union-attr]
        "id": "narrator",
        "object": "audio.voice",
        "name": "narrator",
        "type": "audio_sample",
        "created_at": 1_700_000_000,
        "transcript": "Hello there",
        "duration_s": 2.0,
    }
    assert again.get("designed").public()["prompt"] == "female, low pitch"  # type: ignore[union-attr]
    assert sorted(p.name for p in (tmp_path / "voices").iterdir()) == [
        "designed.voice",
        "narrator.voice",
    ]


def test_a_taken_name_is_a_conflict_even_between_two_stores(tmp_path: Path) -> None:
    first, second = VoiceStore(tmp_path), VoiceStore(tmp_path)
    first.add(sample())
    with pytest.raises(Conflict):
        first.add(sample())
    with pytest.raises(Conflict):  # the other store's memory does not know it; the hard link does
        second.add(sample())
    assert [p.name for p in tmp_path.iterdir()] == ["narrator.voice"]  # no temporary file left


def test_delete_removes_the_file(tmp_path: Path) -> None:
    store = VoiceStore(tmp_path)
    store.add(sample())
    assert store.delete("narrator") and not store.delete("narrator")
    assert list(tmp_path.iterdir()) == [] and VoiceStore(tmp_path).list() == []


def test_unreadable_files_are_skipped(tmp_path: Path) -> None:
    (tmp_path / "garbage.voice").write_bytes(b"\x00not msgpack")
    (tmp_path / "truncated.voice").write_bytes(sample("truncated").to_file()[:-10])
    (tmp_path / "renamed.voice").write_bytes(sample("other").to_file())
    bad_tokens = SavedVoice(
        "bad",
        1,
        "audio_sample",
        transcript="x",
        voice={**PROMPT, "tokens": {"shape": [8, 9], "data": b""}},
    )
    (tmp_path / "bad.voice").write_bytes(bad_tokens.to_file())
    (tmp_path / "fine.voice").write_bytes(sample("fine").to_file())
    assert [v.name for v in VoiceStore(tmp_path).list()] == ["fine"]


def test_the_clone_cache_keeps_the_most_recently_used() -> None:
    cache = PromptCache(2)
    keys = [
        cache.key(b"audio", "text", True, "alice"),
        cache.key(b"audio", "text", False, "alice"),
        cache.key(b"audio", "other", True, "alice"),
    ]
    assert len(set(keys)) == 3
    assert cache.key(b"audio", "text", True, "bob") != keys[0]  # each owner its own entries
    cache.put(keys[0], PROMPT)  # type: ignore[arg-type]
    cache.put(keys[1], PROMPT)  # type: ignore[arg-type]
    assert cache.get(keys[0]) is PROMPT
    cache.put(keys[2], PROMPT)  # type: ignore[arg-type]
    assert (
        cache.get(keys[1]) is None and cache.get(keys[0]) is PROMPT and cache.get(keys[2]) is PROMPT
    )
