"""Delivery profiles: resampled, G.711 and loudness-normalised output, checked by decoders and a
meter that are not the code under test (libsndfile through soundfile, libav's decoders through
PyAV, pyloudnorm for BS.1770 loudness, scipy's polyphase resampler for the 4x true peak)."""

from __future__ import annotations

import io

import av
import numpy as np
import pyloudnorm
import pytest
import soundfile
from scipy.signal import resample_poly

from supervisor.errors import InvalidRequest
from supervisor.settings import Settings
from supervisor.speech.audio import delivery
from supervisor.speech.audio.delivery import Profile
from supervisor.speech.audio.loudness import Target
from supervisor.speech.request import schemas

RATE = 24000


def speechlike(seconds: float = 5.0, seed: int = 0) -> bytes:
    """Syllable-like bursts of a voiced tone over noise, with one hot transient: a crest factor
    like speech's, so a podcast target needs the limiter."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(RATE * seconds)) / RATE
    envelope = np.abs(np.sin(2 * np.pi * 1.3 * t)) ** 3
    signal = 0.3 * np.sin(2 * np.pi * 180 * t) * envelope + 0.05 * rng.standard_normal(t.size)
    hot = slice(t.size // 2, t.size // 2 + 2400)
    signal[hot] += 0.9 * np.sin(2 * np.pi * 3000 * t[hot])
    return (np.clip(signal, -1, 1) * 32767).astype("<i2").tobytes()


def samples(pcm: bytes) -> np.ndarray:
    return np.frombuffer(pcm, "<i2") / 32768.0


def wav_samples(data: bytes) -> tuple[np.ndarray, int]:
    audio, rate = soundfile.read(io.BytesIO(data), dtype="float64")
    return audio, rate


def true_peak_db(audio: np.ndarray) -> float:
    return float(20 * np.log10(np.abs(resample_poly(audio, 4, 1)).max()))


def av_decode(data: bytes) -> tuple[str, int, int]:
    """(codec, sample rate, samples) as libav decodes a file."""
    with av.open(io.BytesIO(data)) as container:
        stream = container.streams.audio[0]
        count = sum(frame.samples for frame in container.decode(stream))
        return stream.codec_context.name, stream.codec_context.sample_rate, count


# ---------------------------------------------------------------- loudness


@pytest.mark.parametrize(
    ("loudness", "lufs", "ceiling"),
    [
        ("podcast", -16.0, -1.0),
        ("broadcast", -23.0, -1.0),
        ({"lufs": -12, "true_peak_db": -2}, -12.0, -2.0),
    ],
)
def test_loudness_reaches_its_target_by_an_independent_meter(
    loudness: object, lufs: float, ceiling: float
) -> None:
    target = delivery.parse_loudness(loudness)
    source = samples(speechlike())
    assert abs(pyloudnorm.Meter(RATE).integrated_loudness(source) - lufs) > 1.0  # work to do
    data = delivery.encode("wav", speechlike(), RATE, Profile(loudness=target))
    audio, rate = wav_samples(data)
    assert rate == RATE and len(audio) == len(source)
    assert abs(pyloudnorm.Meter(rate).integrated_loudness(audio) - lufs) <= 1.0
    assert true_peak_db(audio) <= ceiling + 0.2  # s16 rounding and scipy's filter differ a little


def test_acx_lands_in_its_rms_band_with_peaks_under_minus_3_db() -> None:
    data = delivery.encode(
        "wav", speechlike(seed=1), RATE, Profile(loudness=delivery.PRESETS["acx"])
    )
    audio, _ = wav_samples(data)
    rms_db = 20 * np.log10(np.sqrt(np.mean(audio**2)))
    assert -23.0 <= rms_db <= -18.0
    assert 20 * np.log10(np.abs(audio).max()) <= -3.0


def test_loudness_over_a_resampled_g711_file() -> None:
    """Normalised after resampling, before G.711: the 8 kHz file still meets the target."""
    wanted = Profile(loudness=delivery.PRESETS["broadcast"])
    data = delivery.encode("alaw", speechlike(seed=2), RATE, wanted)
    audio, rate = wav_samples(data)
    assert rate == 8000
    assert abs(pyloudnorm.Meter(rate).integrated_loudness(audio) - -23.0) <= 1.0


def test_silence_is_left_as_it_is() -> None:
    silence = bytes(RATE * 2)
    data = delivery.encode("pcm", silence, RATE, Profile(loudness=delivery.PRESETS["podcast"]))
    assert data == silence


# ---------------------------------------------------------------- G.711 and sample rates


@pytest.mark.parametrize(
    ("fmt", "tag", "subtype", "codec"),
    [
        ("mulaw", 7, "ULAW", "pcm_mulaw"),
        ("alaw", 6, "ALAW", "pcm_alaw"),
    ],
)
def test_g711_is_a_wav_at_8_khz_in_two_decoders(
    fmt: str, tag: int, subtype: str, codec: str
) -> None:
    pcm = speechlike(2.0)
    data = delivery.encode(fmt, pcm, RATE, Profile())
    assert data[:4] == b"RIFF" and data[8:16] == b"WAVEfmt " and data[20:22] == bytes([tag, 0])
    info = soundfile.info(io.BytesIO(data))
    assert (info.samplerate, info.subtype, info.frames) == (8000, subtype, 16000)
    assert av_decode(data) == (codec, 8000, 16000)
    # The same sound: against the source resampled to 8 kHz by scipy, G.711's 8-bit error only.
    audio, _ = wav_samples(data)
    reference = resample_poly(samples(pcm), 1, 3)
    assert np.corrcoef(audio[100:-100], reference[100:-100])[0, 1] > 0.99


def test_g711_streamed_chunk_by_chunk_decodes_whole() -> None:
    pcm = speechlike(2.0)
    encoder = delivery.encoder("mulaw", RATE, Profile(sample_rate=16000))
    data = b"".join(encoder.feed(pcm[i : i + 9600]) for i in range(0, len(pcm), 9600))
    data += encoder.finish()
    info = soundfile.info(io.BytesIO(data))
    assert (info.samplerate, info.subtype) == (16000, "ULAW")
    assert abs(info.frames - 32000) <= 64  # the resampler's delay is flushed, not lost


ANY_RATE = (8000, 11025, 16000, 22050, 32000, 44100, 48000, 12345)


@pytest.mark.parametrize("rate", ANY_RATE)
@pytest.mark.parametrize("fmt", ["wav", "flac", "mulaw", "alaw"])
def test_every_sample_rate_decodes_at_that_rate(fmt: str, rate: int) -> None:
    data = delivery.encode(fmt, speechlike(1.0), RATE, Profile(sample_rate=rate))
    info = soundfile.info(io.BytesIO(data))
    assert info.samplerate == rate and abs(info.frames - rate) <= 2
    assert av_decode(data)[1] == rate


@pytest.mark.parametrize("fmt", ["mp3", "aac"])
def test_lossy_codecs_at_each_of_their_rates(fmt: str) -> None:
    for rate in delivery.CODEC_RATES[fmt]:
        data = delivery.encode(fmt, speechlike(1.0), RATE, Profile(sample_rate=rate))
        _, decoded_rate, count = av_decode(data)
        # AAC and MP3 frames add their encoder delay and padding: up to two frames of 1152.
        assert decoded_rate == rate and abs(count - rate) <= 2 * 1152


def test_pcm_at_another_rate_is_that_many_samples() -> None:
    data = delivery.encode("pcm", speechlike(1.0), RATE, Profile(sample_rate=16000))
    assert abs(len(data) // 2 - 16000) <= 2


def test_streamed_resampling_matches_the_whole_file() -> None:
    """One resampler across chunks: no seams, the same samples as resampling all at once."""
    pcm = speechlike(2.0)
    whole = delivery.resample(pcm, RATE, 16000)
    stream = delivery.Resampler(RATE, 16000)
    pieces = b"".join(stream.feed(pcm[i : i + 7000]) for i in range(0, len(pcm), 7000))
    assert pieces + stream.finish() == whole


# ---------------------------------------------------------------- bad values


@pytest.mark.parametrize(
    ("fields", "param", "says"),
    [
        ({"sample_rate": 7999}, "sample_rate", "between 8000 and 48000"),
        ({"sample_rate": 48001}, "sample_rate", "between 8000 and 48000"),
        ({"sample_rate": "16000"}, "sample_rate", "expected an integer"),
        ({"sample_rate": 16000.0}, "sample_rate", "expected an integer"),
        (
            {"sample_rate": 44100, "response_format": "opus"},
            "sample_rate",
            "cannot be encoded as opus",
        ),
        (
            {"sample_rate": 10000, "response_format": "mp3"},
            "sample_rate",
            "cannot be encoded as mp3",
        ),
        ({"loudness": "loud"}, "loudness", "got 'loud'"),
        ({"loudness": -16}, "loudness", "got int"),
        ({"loudness": {"lufs": -3}}, "loudness", "'lufs' is -3"),
        ({"loudness": {"lufs": "-16"}}, "loudness", "'lufs' is '-16'"),
        ({"loudness": {"lufs": -16, "true_peak_db": 1}}, "loudness", "'true_peak_db' is 1"),
        ({"loudness": {"lufs": -16, "peak": -1}}, "loudness", "unknown key(s) peak"),
        ({"response_format": "ulaw"}, "response_format", "mulaw, alaw"),
    ],
)
def test_bad_delivery_values_are_clear_400s(
    fields: dict[str, object], param: str, says: str
) -> None:
    with pytest.raises(InvalidRequest) as caught:
        schemas.speech_request({"input": "Hello.", **fields}, Settings(model="x").speech)
    assert caught.value.status == 400 and caught.value.param == param
    assert says in caught.value.message


def test_good_delivery_values_are_read() -> None:
    request = schemas.speech_request(
        {"input": "Hello.", "response_format": "mulaw", "loudness": "ACX", "sample_rate": 16000},
        Settings(model="x").speech,
    )
    assert request.loudness == Target(-20.0, -3.0, "rms") and request.sample_rate == 16000
    assert delivery.profile(request).rate("mulaw", RATE) == 16000
    assert Profile().rate("alaw", RATE) == 8000 and Profile().rate("wav", RATE) == RATE
