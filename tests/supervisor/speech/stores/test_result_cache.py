"""The result cache on a real directory: entries, LRU eviction by bytes, atomic writes, a full
disk (a real 1 MiB tmpfs) that is logged and never raised, and keys that change with every input
that shapes the audio and with nothing else."""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from supervisor import metrics
from supervisor.settings import Settings
from supervisor.speech.request import schemas
from supervisor.speech.request.voice import Voice
from supervisor.speech.stores import result_cache
from supervisor.speech.stores.result_cache import CachedResult, ResultCache
from tests.helpers.tmpfs import fill, mount_tmpfs

META = {"format": "wav", "sample_rate": 24000, "seed": 1, "audio_s": 1.0, "chunks": 1}


def entry(size: int, fill: bytes = b"a") -> CachedResult:
    return CachedResult(fill * size, META)


def test_an_entry_comes_back_as_it_went_in(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path, 10_000)
    cache.load()
    hits, misses = metrics.result_cache_hits._value.get(), metrics.result_cache_misses._value.get()
    assert cache.get("ab" * 32) is None
    cache.put("ab" * 32, CachedResult(b"RIFF...", META))
    found = cache.get("ab" * 32)
    assert found == CachedResult(b"RIFF...", META)
    assert metrics.result_cache_hits._value.get() == hits + 1
    assert metrics.result_cache_misses._value.get() == misses + 1
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == ["ab" * 32]  # no temp left


def test_the_least_recently_used_go_first_and_a_restart_remembers(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path, 3_500)  # three entries of ~1,070 bytes fit
    cache.load()
    for name in ("k1", "k2", "k3"):
        cache.put(name, entry(1000))
    assert cache.get("k1") is not None  # k1 used: k2 is now the oldest
    cache.put("k4", entry(1000))
    assert set(cache.sizes) == {"k1", "k3", "k4"} and cache.total <= 3_500
    assert not cache.path("k2").exists()
    again = ResultCache(tmp_path, 2_200)  # a restart with a lower cap: the oldest by file time go
    again.load()
    assert set(again.sizes) == {"k1", "k4"}
    assert metrics.result_cache_bytes._value.get() == again.total


def test_an_entry_larger_than_the_cache_is_not_kept(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path, 500)
    cache.load()
    cache.put("big", entry(1000))
    assert cache.sizes == {} and cache.get("big") is None


def test_a_damaged_entry_is_a_miss_and_is_removed(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path, 10_000)
    cache.load()
    cache.put("k1", entry(10))
    cache.path("k1").write_bytes(b"\xff\xff")
    assert cache.get("k1") is None and not cache.path("k1").exists() and cache.total == 0


def test_a_leftover_temporary_file_is_removed_at_load(tmp_path: Path) -> None:
    (tmp_path / "k1").mkdir()
    (tmp_path / "k1" / ".k1abc.12345678.tmp").write_bytes(b"half")
    cache = ResultCache(tmp_path, 10_000)
    cache.load()
    assert cache.sizes == {} and not any(tmp_path.rglob("*.tmp"))


def test_purge_removes_everything(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path, 10_000)
    cache.load()
    cache.put("k1", entry(10))
    cache.put("k2", entry(10))
    assert cache.purge() == (
        2,
        cache.total + 2 * (10 + 4 + len(result_cache.json.dumps(META, separators=(",", ":")))),
    )
    assert cache.get("k1") is None and not list(tmp_path.rglob("k*/k*"))


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    with mount_tmpfs(tmp_path / "disk", "1m") as mount:
        yield mount


def test_a_full_disk_is_logged_once_and_never_raised(
    tiny_disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cache = ResultCache(tiny_disk / "cache", 10 * 2**20)
    cache.load()
    fill(tiny_disk)
    with caplog.at_level(logging.ERROR, "omnivoice.cache"):
        cache.put("k1", entry(5000))
        cache.put("k2", entry(5000))
    assert cache.sizes == {} and cache.write_error is not None
    assert [r.message for r in caplog.records].count(caplog.records[0].message) == 1
    assert not [p for p in (tiny_disk / "cache").rglob("*") if p.is_file()]  # no half file
    os.remove(tiny_disk / "filler")
    cache.put("k3", entry(5000))
    assert cache.get("k3") is not None and cache.write_error is None


# ---------------------------------------------------------------- keys

SETTINGS = Settings(model="x")
NO_VOICE = Voice()


def request(**fields: object) -> schemas.SpeechRequest:
    return schemas.speech_request({"input": "Hello there.", "seed": 5, **fields}, SETTINGS.speech)


def key(
    speech: schemas.SpeechRequest,
    voice: Voice = NO_VOICE,
    settings: Settings = SETTINGS,
    identity: str = "ckpt",
) -> str:
    return result_cache.key(identity, speech, voice, settings.speech, "speech")


@pytest.mark.parametrize(
    "change",
    [
        {"input": "Hello there!"},
        {"seed": 6},
        {"num_step": 8},
        {"guidance_scale": 3.0},
        {"response_format": "flac"},
        {"sample_rate": 16000},
        {"loudness": "podcast"},
        {"loudness": {"lufs": -16, "true_peak_db": -2}},
        {"speed": 1.1},
        {"language": "en"},
        {"duration": 2.0},
        {"denoise": False},
        {"chunk_mode": "sequential"},
        {"chunk_duration": 3.0},
    ],
)
def test_every_input_that_shapes_the_audio_changes_the_key(change: dict[str, object]) -> None:
    assert key(request(**change)) != key(request())


def test_what_does_not_shape_the_audio_leaves_the_key() -> None:
    base = key(request())
    assert key(request(model="tts-1", request_timeout_s=30, stream_format="sse")) == base


def test_the_voice_checkpoint_and_chunking_settings_are_in_the_key() -> None:
    base = key(request())
    prompt = {"tokens": {"shape": [8, 2], "data": b"\x01" * 32}, "ref_text": "Hi.", "ref_rms": 0.1}
    other = {**prompt, "tokens": {"shape": [8, 2], "data": b"\x02" * 32}}
    assert key(request(), Voice(instruct="female")) != base
    assert key(request(), Voice(prompt=prompt)) != key(request(), Voice(prompt=other))  # type: ignore[arg-type]
    assert key(request(), identity="other") != base
    job = result_cache.key("ckpt", request(), NO_VOICE, SETTINGS.speech, "job")
    assert job != base  # a long speech answer is a stream, a job item a whole file
    assert key(request(), settings=dataclasses.replace(SETTINGS, chunk_s=9.0)) != base
    for qa in ({"qa_retries": 0}, {"qa_thresholds": "max_wer=0.5"}, {"asr_model": "whisper"}):
        assert key(request(), settings=dataclasses.replace(SETTINGS, **qa)) != base  # type: ignore[arg-type]


def test_a_checkpoint_identity_follows_its_files(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    settings = Settings(model=str(tmp_path))
    first = result_cache.checkpoint_identity(settings.sidecar)
    assert result_cache.checkpoint_identity(settings.sidecar) == first
    (tmp_path / "model.safetensors").write_bytes(b"weights")
    assert result_cache.checkpoint_identity(settings.sidecar) != first
    assert (
        result_cache.checkpoint_identity(dataclasses.replace(settings, dtype="bfloat16").sidecar)
        != first
    )


def test_an_item_seed_is_its_fields() -> None:
    fields = {"input": "Hello.", "voice": "auto"}
    assert result_cache.item_seed(fields) == result_cache.item_seed(dict(reversed(fields.items())))
    assert result_cache.item_seed(fields) != result_cache.item_seed({**fields, "input": "Hi."})
    assert 0 <= result_cache.item_seed(fields) <= schemas.MAX_SEED


def opened(**values: Any) -> result_cache.ResultCache | None:
    settings = Settings(model="x", **values)
    return result_cache.open_cache(settings.speech, settings.sidecar)


def test_no_cache_at_zero_bytes_and_none_where_its_directory_cannot_be_made(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    assert opened(cache_max_bytes=0) is None
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with caplog.at_level(logging.ERROR, "omnivoice.cache"):
        cache = opened(cache_dir=str(blocker / "cache"))
    assert cache is None and "running without one" in caplog.text
    made = opened(data_dir=str(tmp_path / "data"))
    assert made is not None and made.directory == tmp_path / "data" / "cache"
