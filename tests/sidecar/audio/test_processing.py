"""Audio post- and pre-processing: parity with the reference fixtures, and plain behaviour."""

from __future__ import annotations

import io
import logging

import numpy as np
import pytest
import soundfile as sf

from sidecar.audio import silence as audio
from sidecar.audio.processing import (
    cross_fade_chunks,
    fade_and_pad,
    normalize_output_loudness,
    normalize_reference_loudness,
    prepare_reference,
    read_audio,
    remove_silence,
    trim_long_audio,
)
from sidecar.shared.errors import InvalidAudio

SR = 24000
ONE_STEP = 1 / 32768  # one 16-bit quantisation step


def _tone(seconds: float, sr: int = SR, amp: float = 0.3, freq: float = 220.0) -> np.ndarray:
    t = np.arange(round(seconds * sr)) / sr
    return (amp * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def _silence(seconds: float, sr: int = SR) -> np.ndarray:
    return np.zeros(round(seconds * sr), np.float32)


# --- parity with the reference fixtures -------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "mid", "lead", "trail"),
    [("remove_silence_gen", 500, 100, 100), ("remove_silence_ref", 200, 100, 200)],
)
def test_remove_silence_matches_reference(expected, name, mid, lead, trail):
    got = remove_silence(expected["silence_in"], SR, mid, lead, trail)
    want = expected[name]
    assert got.dtype == np.float32
    assert got.shape == want.shape
    assert np.abs(got - want).max() <= ONE_STEP


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


# --- silence removal -------------------------------------------------------------------------


@pytest.mark.parametrize(("mid", "lead", "trail"), [(500, 100, 100), (200, 100, 200)])
def test_silent_input_gives_empty_output(mid, lead, trail):
    assert remove_silence(_silence(2.0), SR, mid, lead, trail).shape == (0,)
    quiet = np.random.default_rng(0).normal(0, 1e-4, 2 * SR).astype(np.float32)  # about -80 dBFS
    assert remove_silence(quiet, SR, mid, lead, trail).shape == (0,)


def test_long_internal_silence_is_cut_to_twice_keep_silence():
    x = np.concatenate([_tone(1.0), _silence(3.0), _tone(1.0)])
    y = remove_silence(x, SR, 500, 100, 100)
    # Non-silent [0, 1000] and [4000, 5000] ms, each padded by 500 ms: 1.5 s + 1.5 s.
    assert y.shape == (3 * SR,)
    np.testing.assert_allclose(y[:SR], x[:SR], atol=ONE_STEP)  # the sound itself is kept (16-bit)


def test_edges_keep_lead_and_trail_silence():
    x = np.concatenate([_silence(1.0), _tone(1.0), _silence(1.0)])
    y = remove_silence(x, SR, 0, 100, 200)
    # 1.0 s of tone plus 100 ms before and 200 ms after it.
    assert y.shape == (int(1.3 * SR),)
    assert np.all(y[: int(0.1 * SR)] == 0) and np.all(y[-int(0.2 * SR) :] == 0)


def test_output_is_16_bit_quantised_with_truncation():
    x = np.full(SR, 0.1 + 0.3 / 32768, np.float32)
    y = remove_silence(x, SR, 500, 100, 100)
    assert y.shape == (SR,)
    np.testing.assert_array_equal(y * 32768, np.trunc(x * np.float32(32768)))


def test_clip_of_fractional_milliseconds_gets_pydubs_zero_fill():
    # 24013 samples are 1000.54 ms; pydub rounds to 1001 ms and fills the slice up to it with zeros.
    x = np.random.default_rng(1).normal(0, 0.2, 24013).astype(np.float32)
    y = remove_silence(x, SR, 500, 100, 100)
    assert y.shape == (24024,)
    assert np.all(y[24013:] == 0)


def test_trim_long_audio_cuts_at_a_pause_within_15_s():
    unit = np.concatenate([_tone(0.8), _silence(0.4)])  # a sound starts every 1.2 s
    x = np.tile(unit, 21)  # 25.2 s
    y = trim_long_audio(x, SR)
    # Latest sound start <= 15 s is at 14.4 s.
    assert y.shape == (int(14.4 * SR),)
    short = x[: 19 * SR]
    np.testing.assert_array_equal(
        trim_long_audio(short, SR), short
    )  # <= 20 s: untouched, not quantised


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
    x = _tone(0.5, amp=0.8)
    np.testing.assert_allclose(normalize_output_loudness(x, 0.05), x * 0.5, rtol=1e-6)
    np.testing.assert_array_equal(normalize_output_loudness(x, 0.2), x)
    assert not normalize_output_loudness(x, 0.0).any()  # a silent reference yields silence
    peaked = normalize_output_loudness(x, None)
    assert np.abs(peaked).max() == pytest.approx(0.5, rel=1e-6)
    tiny = np.full(10, 1e-7, np.float32)
    np.testing.assert_array_equal(normalize_output_loudness(tiny, None), tiny)
    assert normalize_output_loudness(np.zeros(0, np.float32), None).shape == (0,)


def test_reference_loudness_boosts_only_quiet_clips():
    quiet = _tone(1.0, amp=0.01)
    boosted, rms = normalize_reference_loudness(quiet)
    assert rms == pytest.approx(0.01 / np.sqrt(2), rel=1e-3)
    assert np.sqrt(np.mean(boosted.astype(np.float64) ** 2)) == pytest.approx(0.1, rel=1e-5)
    loud = _tone(1.0, amp=0.5)
    same, rms = normalize_reference_loudness(loud)
    np.testing.assert_array_equal(same, loud)
    assert rms == pytest.approx(0.5 / np.sqrt(2), rel=1e-3)
    zeros, rms = normalize_reference_loudness(_silence(0.1))
    assert rms == 0.0 and not zeros.any()


# --- reading files -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fmt", "subtype"), [("WAV", "PCM_16"), ("FLAC", "PCM_16"), ("WAV", "FLOAT")]
)
def test_read_audio_stereo_44k_bytes(fmt, subtype):
    sr = 44100
    left, right = _tone(0.5, sr, 0.4, 440.0), _tone(0.5, sr, 0.2, 660.0)
    buf = io.BytesIO()
    sf.write(buf, np.stack([left, right], axis=1), sr, format=fmt, subtype=subtype)
    audio, got_sr = read_audio(buf.getvalue())
    assert got_sr == sr
    assert audio.dtype == np.float32 and audio.shape == left.shape
    np.testing.assert_allclose(audio, (left + right) / 2, atol=2 / 32768)


def test_read_audio_from_path(tmp_path):
    x = _tone(0.25)
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
        prepare_reference(_silence(2.0), SR, preprocess, has_ref_text=True)
    with pytest.raises(InvalidAudio, match="codec frame"):
        prepare_reference(_tone(0.02), SR, preprocess=False, has_ref_text=True)


def test_reference_at_other_rate_is_resampled_and_frame_aligned():
    x = _tone(1.3, sr=44100)
    audio, ref_rms = prepare_reference(x, 44100, preprocess=False, has_ref_text=True)
    n24 = int(np.ceil(len(x) * 24000 / 44100))
    assert audio.shape == (n24 - n24 % 960,)
    assert ref_rms == pytest.approx(0.3 / np.sqrt(2), rel=1e-2)


def test_long_reference_is_trimmed_without_transcript_and_warned_about_with_one(caplog):
    unit = np.concatenate([_tone(0.8), _silence(0.3)])
    x = np.tile(unit, 23)  # 25.3 s; the 300 ms pauses survive silence removal
    with caplog.at_level(logging.WARNING, logger="sidecar.audio.processing"):
        trimmed, _ = prepare_reference(x, SR, preprocess=True, has_ref_text=False)
    assert trimmed.size <= 15 * SR and trimmed.size % 960 == 0
    assert not caplog.records

    with caplog.at_level(logging.WARNING, logger="sidecar.audio.processing"):
        kept, _ = prepare_reference(x, SR, preprocess=True, has_ref_text=True)
    assert kept.size > 20 * SR and kept.size % 960 == 0
    assert any(">20s" in r.getMessage() for r in caplog.records)


# --- the edge-silence scan, against pydub's chunk-at-a-time loop ------------------------------


def _leading_silence_one_chunk_at_a_time(pcm: audio._Pcm, thresh_dbfs: float) -> int:
    """pydub.silence.detect_leading_silence as pydub writes it: one 10 ms chunk per test."""
    trim, seg_len = 0, len(pcm)
    while audio._dbfs(pcm.rms(trim, trim + 10)) < thresh_dbfs and trim < seg_len:
        trim += 10
    return min(trim, seg_len)


@pytest.mark.parametrize("thresh_dbfs", [-50.0, -40.0, -16.5])
def test_the_quiet_rms_limit_is_the_dbfs_test(thresh_dbfs: float) -> None:
    limit = audio._quiet_rms(thresh_dbfs)
    for rms in range(max(0, limit - 50), limit + 50):
        assert (rms <= limit) == (audio._dbfs(rms) < thresh_dbfs), rms


@pytest.mark.parametrize("rate", [24000, 22050, 16000])
def test_leading_silence_matches_the_chunk_at_a_time_scan(rate: int) -> None:
    # Leading silences from none to longer than several doubling blocks (they begin at 0, 320,
    # 960, 2240 and 4800 ms; sound starting in a block's first or last chunk), sound just above
    # and below the threshold, clips of no whole number of chunks, and all-silent ones.
    rng = np.random.default_rng(rate)
    lead_ms = [0, 0.05, 0.3, 0.4, 9.9, 10.1, 83, 315, 325, 955, 965, 2245, 4795, 4805]
    for case in range(120):
        lead = int(float(rng.choice(lead_ms)) * rate / 1000)
        level = float(rng.choice([0.0, 10 ** (-52 / 20), 10 ** (-49 / 20), 0.1]))
        body = (rng.standard_normal(int(rng.integers(0, 40000))) * level).astype(np.float32)
        quiet = (rng.standard_normal(lead) * 10 ** (-60 / 20)).astype(np.float32)
        pcm = audio._Pcm(audio._to_int16(np.concatenate([quiet, body])), rate)
        for thresh in (-50.0, -40.0):
            want = _leading_silence_one_chunk_at_a_time(pcm, thresh)
            assert audio._leading_silence_ms(pcm, thresh) == want, (case, lead, level, thresh)
            # And on a fresh clip, whose squares are not yet summed by the scan above.
            fresh = audio._Pcm(pcm.samples, rate)
            assert audio._leading_silence_ms(fresh, thresh) == want


def test_rms_over_prefix_sums_grown_in_steps_equals_one_pass() -> None:
    rng = np.random.default_rng(1)
    samples = rng.integers(-32768, 32767, 50000).astype(np.int16)
    grown, whole = audio._Pcm(samples, SR), audio._Pcm(samples, SR)
    whole.rms(0, len(whole))  # sums every square at once
    for start in (0, 1, 5, 40, 300, 1000, 2080):
        assert grown.rms(start, start + 10) == whole.rms(start, start + 10)
    starts = np.arange(0, len(whole), 7)
    np.testing.assert_array_equal(grown.window_rms(starts, 10), whole.window_rms(starts, 10))
