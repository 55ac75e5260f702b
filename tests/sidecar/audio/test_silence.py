"""sidecar/audio/silence.py: silence removal and long-audio trimming as pydub does them, parity with
the reference fixtures, and the faster scans checked against pydub's own one-chunk-at-a-time ones."""

from __future__ import annotations

import numpy as np
import pytest

from sidecar.audio import silence as audio
from sidecar.audio.silence import remove_silence, trim_long_audio
from tests.helpers.signals import silent, tone

SR = 24000
ONE_STEP = 1 / 32768  # one 16-bit quantisation step


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


@pytest.mark.parametrize(("mid", "lead", "trail"), [(500, 100, 100), (200, 100, 200)])
def test_silent_input_gives_empty_output(mid, lead, trail):
    assert remove_silence(silent(2.0), SR, mid, lead, trail).shape == (0,)
    quiet = np.random.default_rng(0).normal(0, 1e-4, 2 * SR).astype(np.float32)  # about -80 dBFS
    assert remove_silence(quiet, SR, mid, lead, trail).shape == (0,)


def test_long_internal_silence_is_cut_to_twice_keep_silence():
    x = np.concatenate([tone(1.0), silent(3.0), tone(1.0)])
    y = remove_silence(x, SR, 500, 100, 100)
    # Non-silent [0, 1000] and [4000, 5000] ms, each padded by 500 ms: 1.5 s + 1.5 s.
    assert y.shape == (3 * SR,)
    np.testing.assert_allclose(y[:SR], x[:SR], atol=ONE_STEP)  # the sound itself is kept (16-bit)


def test_edges_keep_lead_and_trail_silence():
    x = np.concatenate([silent(1.0), tone(1.0), silent(1.0)])
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
    unit = np.concatenate([tone(0.8), silent(0.4)])  # a sound starts every 1.2 s
    x = np.tile(unit, 21)  # 25.2 s
    y = trim_long_audio(x, SR)
    # Latest sound start <= 15 s is at 14.4 s.
    assert y.shape == (int(14.4 * SR),)
    short = x[: 19 * SR]
    np.testing.assert_array_equal(
        trim_long_audio(short, SR), short
    )  # <= 20 s: untouched, not quantised


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
