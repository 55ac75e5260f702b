"""The windowed-sinc resampler: parity with the reference's torchaudio results, and plain behaviour."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from sidecar.audio.resample import resample, resample_tensor


@pytest.mark.parametrize(
    ("inp", "out", "orig_sr", "new_sr"),
    [
        ("resample_in", "resample_24k_16k", 24000, 16000),
        ("resample_44k_24k_in", "resample_44k_24k", 44100, 24000),
    ],
)
def test_matches_reference_fixture(expected, inp, out, orig_sr, new_sr):
    got = resample(expected[inp], orig_sr, new_sr)
    want = expected[out]
    assert got.dtype == np.float32
    assert got.shape == want.shape
    # The README allows 1e-4; the codec's 24k->16k step needs far closer, and the same kernel
    # built the same way gives (near) bit-identical output.
    assert np.abs(got - want).max() <= 1e-6


def test_tensor_path_equals_numpy_path_and_keeps_leading_dims(expected):
    x = expected["resample_in"][:30000]
    batch = torch.from_numpy(np.stack([x, -x, 0.5 * x]))[None]  # [1, 3, N]
    out = resample_tensor(batch, 24000, 16000)
    assert out.shape == (1, 3, 20000)
    assert out.dtype == torch.float32
    np.testing.assert_array_equal(out[0, 0].numpy(), resample(x, 24000, 16000))
    np.testing.assert_allclose(out[0, 1].numpy(), -out[0, 0].numpy(), atol=1e-7)


@pytest.mark.parametrize(
    ("orig_sr", "new_sr"), [(44100, 24000), (16000, 24000), (24000, 16000), (48000, 24000)]
)
def test_sine_keeps_frequency_and_amplitude(orig_sr, new_sr):
    freq, amp, seconds = 440.0, 0.5, 1.0
    t = np.arange(int(orig_sr * seconds)) / orig_sr
    x = (amp * np.sin(2 * np.pi * freq * t)).astype(np.float32)
    y = resample(x, orig_sr, new_sr)
    assert y.shape == (math.ceil(len(x) * new_sr / orig_sr),)
    # Compare with the ideal sine away from the zero-padded edges.
    ty = np.arange(len(y)) / new_sr
    ideal = amp * np.sin(2 * np.pi * freq * ty)
    mid = slice(len(y) // 10, -len(y) // 10)
    assert np.abs(y[mid] - ideal[mid]).max() < 2e-3 * amp
    spectrum = np.abs(np.fft.rfft(y[mid] * np.hanning(len(y[mid]))))
    peak_hz = np.argmax(spectrum) * new_sr / len(y[mid])
    assert abs(peak_hz - freq) < 2.0


def test_downsampling_removes_content_above_the_new_nyquist():
    sr = 24000
    t = np.arange(sr) / sr
    x = (0.5 * np.sin(2 * np.pi * 10000 * t)).astype(np.float32)  # above 8 kHz, the 16 kHz Nyquist
    y = resample(x, sr, 16000)
    assert np.abs(y[1000:-1000]).max() < 0.01


def test_equal_rates_are_identity_and_float64_stays_float64():
    x = np.random.default_rng(0).normal(size=1000)
    np.testing.assert_array_equal(resample(x, 24000, 24000), x)
    t = torch.from_numpy(x)
    assert resample_tensor(t, 24000, 24000) is t
    y = resample(x, 24000, 16000)
    assert y.dtype == np.float64 and y.shape == (667,)


def test_float64_agrees_with_float32_to_float32_precision():
    x = np.random.default_rng(1).normal(0, 0.2, 5000).astype(np.float32)
    y32 = resample(x, 44100, 24000)
    y64 = resample(x.astype(np.float64), 44100, 24000)
    assert np.abs(y32 - y64).max() < 1e-5


def test_bad_arguments_are_rejected():
    with pytest.raises(ValueError):
        resample(np.zeros(10, np.float32), 24000.5, 16000)
    with pytest.raises(ValueError):
        resample(np.zeros(10, np.float32), 0, 16000)
    with pytest.raises(TypeError):
        resample_tensor(torch.zeros(10, dtype=torch.int16), 24000, 16000)


def test_kernel_is_cached_and_usable_with_autograd():
    from sidecar.audio import resample as mod

    with torch.inference_mode():
        resample_tensor(torch.zeros(100), 24000, 22050)
    key = (160, 147, torch.device("cpu"), torch.float32)
    kernel = mod._kernels[key][0]
    x = torch.randn(500, requires_grad=True)
    resample_tensor(
        x, 24000, 22050
    ).sum().backward()  # a kernel built in inference mode still works
    assert x.grad is not None
    assert mod._kernels[key][0] is kernel
