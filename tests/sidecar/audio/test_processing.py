"""sidecar/audio/processing.py: fades, joins, loudness, reading audio and preparing a clone
reference; parity with the reference fixtures, and plain behaviour."""

from __future__ import annotations

import io
import logging

import numpy as np
import pytest
import soundfile as sf

from sidecar.audio.processing import (
    cross_fade_chunks,
    fade_and_pad,
    normalize_output_loudness,
    normalize_reference_loudness,
    prepare_reference,
    read_audio,
)
from sidecar.shared.errors import InvalidAudio
from tests.helpers.signals import silent, tone

SR = 24000


# --- parity with the reference fixtures -------------------------------------------------------


def test_fade_and_pad_matches_reference(expected):
    got = fade_and_pad(expected["resample_in"][:24000], SR)
    assert got.shape == expected["fade_pad"].shape
    assert np.abs(got - expected["fade_pad"]).max() <= 1e-6


def test_cross_fade_matches_reference(expected):
    x = expected["resample_in"]
    got = cross_fade_chunks([x[0:24000], x[24000:48000], x[48000:60000]], SR)
    assert got.shape == expected["cross_fade"].shape
    assert np.abs(got - expected["cross_fade"]).max() <= 1e-6


@pytest.mark.parametrize("name", ["ref_a", "ref_b"])
def test_prepare_reference_matches_clone_prompt_cases(cases, expected, name):
    case = next(c for c in cases["clone_prompts"] if c["name"] == name)
    audio, ref_rms = prepare_reference(
        expected[case["wav"]], SR, case["preprocess_prompt"], has_ref_text=True
    )
    assert ref_rms == pytest.approx(case["ref_rms"], rel=1e-6)
    # The codec makes one token per 960 samples, so the length fixes the prompt's frame count.
    assert audio.dtype == np.float32
    assert audio.shape == (expected[case["tokens"]].shape[1] * 960,)


# --- fades, joins, loudness ------------------------------------------------------------------


def test_fade_of_clip_shorter_than_two_fades():
    x = np.ones(1000, np.float32)
    y = fade_and_pad(x, SR)
    pad = 2400
    assert y.shape == (1000 + 2 * pad,)
    assert np.all(y[:pad] == 0) and np.all(y[-pad:] == 0)
    body = y[pad:-pad]
    np.testing.assert_allclose(body[:500], np.linspace(0, 1, 500, dtype=np.float32))
    np.testing.assert_allclose(body[500:], np.linspace(1, 0, 500, dtype=np.float32))
    assert np.all(x == 1)  # the caller's array is not modified


def test_fade_of_empty_and_single_sample_clips():
    assert fade_and_pad(np.zeros(0, np.float32), SR).shape == (0,)
    y = fade_and_pad(np.ones(1, np.float32), SR)  # k = 0: no fade, only padding
    assert y.shape == (4801,) and y[2400] == 1


def test_cross_fade_gap_and_short_chunks():
    ones = np.ones(5000, np.float32)
    y = cross_fade_chunks([ones, ones], SR)
    assert y.shape == (5000 + 2400 + 5000,)
    assert y[5000 - 2400] == 1 and y[4999] == 0  # fade-out ends at zero
    assert np.all(y[5000:7400] == 0)  # the 0.1 s gap
    assert y[7400] == 0 and y[7400 + 2399] == 1  # fade-in
    tiny = cross_fade_chunks([np.ones(3, np.float32), np.ones(2, np.float32)], SR)
    np.testing.assert_array_equal(tiny[:3], [1, 0.5, 0])
    np.testing.assert_array_equal(tiny[-2:], [0, 1])
    single = np.ones(10, np.float32)
    np.testing.assert_array_equal(cross_fade_chunks([single], SR), single)


def test_output_loudness_rules():
    x = tone(0.5, amp=0.8)
    np.testing.assert_allclose(normalize_output_loudness(x, 0.05), x * 0.5, rtol=1e-6)
    np.testing.assert_array_equal(normalize_output_loudness(x, 0.2), x)
    assert not normalize_output_loudness(x, 0.0).any()  # a silent reference yields silence
    peaked = normalize_output_loudness(x, None)
    assert np.abs(peaked).max() == pytest.approx(0.5, rel=1e-6)
    tiny = np.full(10, 1e-7, np.float32)
    np.testing.assert_array_equal(normalize_output_loudness(tiny, None), tiny)
    assert normalize_output_loudness(np.zeros(0, np.float32), None).shape == (0,)


def test_reference_loudness_boosts_only_quiet_clips():
    quiet = tone(1.0, amp=0.01)
    boosted, rms = normalize_reference_loudness(quiet)
    assert rms == pytest.approx(0.01 / np.sqrt(2), rel=1e-3)
    assert np.sqrt(np.mean(boosted.astype(np.float64) ** 2)) == pytest.approx(0.1, rel=1e-5)
    loud = tone(1.0, amp=0.5)
    same, rms = normalize_reference_loudness(loud)
    np.testing.assert_array_equal(same, loud)
    assert rms == pytest.approx(0.5 / np.sqrt(2), rel=1e-3)
    zeros, rms = normalize_reference_loudness(silent(0.1))
    assert rms == 0.0 and not zeros.any()


# --- reading files -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fmt", "subtype"), [("WAV", "PCM_16"), ("FLAC", "PCM_16"), ("WAV", "FLOAT")]
)
def test_read_audio_stereo_44k_bytes(fmt, subtype):
    sr = 44100
    left, right = tone(0.5, sr, 0.4, 440.0), tone(0.5, sr, 0.2, 660.0)
    buf = io.BytesIO()
    sf.write(buf, np.stack([left, right], axis=1), sr, format=fmt, subtype=subtype)
    audio, got_sr = read_audio(buf.getvalue())
    assert got_sr == sr
    assert audio.dtype == np.float32 and audio.shape == left.shape
    np.testing.assert_allclose(audio, (left + right) / 2, atol=2 / 32768)


def test_read_audio_from_path(tmp_path):
    x = tone(0.25)
    path = tmp_path / "ref.wav"
    sf.write(path, x, SR, subtype="FLOAT")
    for source in (path, str(path)):
        audio, sr = read_audio(source)
        assert sr == SR
        np.testing.assert_array_equal(audio, x)


@pytest.mark.parametrize("data", [b"", b"not audio at all" * 100, b"RIFF\x00\x00\x00\x00WAVEfmt "])
def test_read_audio_rejects_garbage(data):
    with pytest.raises(InvalidAudio, match="reference audio"):
        read_audio(data)


def test_read_audio_rejects_missing_file_and_zero_frames(tmp_path):
    with pytest.raises(InvalidAudio):
        read_audio(tmp_path / "missing.wav")
    buf = io.BytesIO()
    sf.write(buf, np.zeros((0, 1), np.float32), SR, format="WAV")
    with pytest.raises(InvalidAudio, match="no samples"):
        read_audio(buf.getvalue())


# --- preparing a reference clip ----------------------------------------------------------------


@pytest.mark.parametrize("preprocess", [True, False])
def test_empty_or_silent_reference_is_rejected(preprocess):
    with pytest.raises(InvalidAudio):
        prepare_reference(np.zeros(0, np.float32), SR, preprocess, has_ref_text=True)
    with pytest.raises(InvalidAudio, match="silent"):
        prepare_reference(silent(2.0), SR, preprocess, has_ref_text=True)
    with pytest.raises(InvalidAudio, match="codec frame"):
        prepare_reference(tone(0.02), SR, preprocess=False, has_ref_text=True)


def test_reference_at_other_rate_is_resampled_and_frame_aligned():
    x = tone(1.3, sr=44100)
    audio, ref_rms = prepare_reference(x, 44100, preprocess=False, has_ref_text=True)
    n24 = int(np.ceil(len(x) * 24000 / 44100))
    assert audio.shape == (n24 - n24 % 960,)
    assert ref_rms == pytest.approx(0.3 / np.sqrt(2), rel=1e-2)


def test_long_reference_is_trimmed_without_transcript_and_warned_about_with_one(caplog):
    unit = np.concatenate([tone(0.8), silent(0.3)])
    x = np.tile(unit, 23)  # 25.3 s; the 300 ms pauses survive silence removal
    with caplog.at_level(logging.WARNING, logger="sidecar.audio.processing"):
        trimmed, _ = prepare_reference(x, SR, preprocess=True, has_ref_text=False)
    assert trimmed.size <= 15 * SR and trimmed.size % 960 == 0
    assert not caplog.records

    with caplog.at_level(logging.WARNING, logger="sidecar.audio.processing"):
        kept, _ = prepare_reference(x, SR, preprocess=True, has_ref_text=True)
    assert kept.size > 20 * SR and kept.size % 960 == 0
    assert any(">20s" in r.getMessage() for r in caplog.records)
