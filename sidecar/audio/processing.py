"""Waveform handling around the model: loading, loudness, fades and joins (numpy); silence removal
is `sidecar.audio.silence`."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import numpy as np
import soundfile as sf

from sidecar.audio.silence import remove_silence, trim_long_audio
from sidecar.shared.errors import InvalidAudio

logger = logging.getLogger(__name__)

SAMPLE_RATE = 24000  # the codec's rate; everything after loading runs at it
HOP_LENGTH = 960  # codec samples per frame (25 frames/s)
REF_TARGET_RMS = 0.1  # quiet references are boosted to this RMS before encoding
LONG_REFERENCE_S = 20.0


def fade_and_pad(
    audio: np.ndarray, sample_rate: int, fade_s: float = 0.1, pad_s: float = 0.1
) -> np.ndarray:
    """Linear fade in/out (at most half the clip each) and zero padding on both sides, against clicks.

    An empty clip comes back empty (no padding), as in the reference.
    """
    out = np.array(np.ravel(audio), dtype=np.float32)  # a copy: the caller's array stays intact
    if out.size == 0:
        return out
    fade_n = int(fade_s * sample_rate)
    pad_n = int(pad_s * sample_rate)
    k = min(fade_n, out.size // 2)
    if fade_n > 0 and k > 0:
        out[:k] *= np.linspace(0, 1, k, dtype=np.float32)
        out[-k:] *= np.linspace(1, 0, k, dtype=np.float32)
    if pad_n > 0:
        pad = np.zeros(pad_n, dtype=np.float32)
        out = np.concatenate([pad, out, pad])
    return out


def cross_fade_chunks(chunks: list[np.ndarray], sample_rate: int, gap_s: float = 0.3) -> np.ndarray:
    """Join separately decoded chunks: fade out, a gap of silence, fade in (no overlap).

    The fade and the silence are each a third of gap_s (0.1 s at the default).
    """
    if not chunks:
        return np.zeros(0, dtype=np.float32)
    fade_n = int(gap_s * sample_rate) // 3
    merged = np.array(np.ravel(chunks[0]), dtype=np.float32)
    for chunk in chunks[1:]:
        nxt = np.array(np.ravel(chunk), dtype=np.float32)
        out_n = min(fade_n, merged.size)
        if out_n > 0:
            merged[-out_n:] *= np.linspace(1, 0, out_n, dtype=np.float32)
        in_n = min(fade_n, nxt.size)
        if in_n > 0:
            nxt[:in_n] *= np.linspace(0, 1, in_n, dtype=np.float32)
        merged = np.concatenate([merged, np.zeros(fade_n, dtype=np.float32), nxt])
    return merged


def normalize_output_loudness(audio: np.ndarray, ref_rms: float | None) -> np.ndarray:
    """Give generated audio its final level.

    With a reference quieter than REF_TARGET_RMS, undo the boost it got before encoding (so a
    silent reference, rms 0, gives silence); a louder one is left as is. Without a reference,
    peak-normalise to 0.5 unless the audio is (near) silent.
    """
    audio = np.asarray(audio, dtype=np.float32)
    if ref_rms is not None:
        if ref_rms < REF_TARGET_RMS:
            return audio * np.float32(ref_rms) / np.float32(REF_TARGET_RMS)
        return audio
    if audio.size == 0:  # the reference would fail on max() of an empty array; nothing to scale
        return audio
    peak = np.abs(audio).max()
    if peak > 1e-6:
        return audio / peak * np.float32(0.5)
    return audio


def normalize_reference_loudness(audio: np.ndarray) -> tuple[np.ndarray, float]:
    """Measure a reference clip's RMS and boost a quiet clip (0 < rms < 0.1) to RMS 0.1.

    Returns the (possibly scaled) float32 audio and the RMS measured before scaling.
    """
    audio = np.asarray(audio, dtype=np.float32)
    if audio.size == 0:
        return audio, 0.0
    ref_rms = float(np.sqrt(np.mean(audio**2)))  # float32 mean, as the reference computes it
    if 0 < ref_rms < REF_TARGET_RMS:
        audio = audio * np.float32(REF_TARGET_RMS) / np.float32(ref_rms)
    return audio, ref_rms


def read_audio(data: bytes | str | Path) -> tuple[np.ndarray, int]:
    """Decode an audio file (bytes or path) with soundfile to mono float32 and its sample rate.

    Channels are averaged. Raises InvalidAudio for anything that cannot be decoded, holds no
    samples or holds non-finite samples.
    """
    source: io.BytesIO | str
    if isinstance(data, (bytes, bytearray, memoryview)):
        if len(data) == 0:
            raise InvalidAudio("reference audio is empty (0 bytes)")
        source, what = io.BytesIO(bytes(data)), "the uploaded reference audio"
    else:
        source, what = str(data), f"reference audio file {str(data)!r}"
    try:
        frames, sample_rate = sf.read(source, dtype="float32", always_2d=True)
    except (
        Exception
    ) as exc:  # soundfile raises several types (LibsndfileError, RuntimeError, TypeError)
        raise InvalidAudio(
            f"could not decode {what}: {exc}. Send a WAV, FLAC or OGG file (formats libsndfile reads)."
        ) from exc
    if frames.shape[0] == 0:
        raise InvalidAudio(f"{what} holds no samples")
    # Same reduction as the reference: mean over the channel axis of the (C, T) view.
    mono = np.ascontiguousarray(frames.T.mean(axis=0), dtype=np.float32)
    if not np.isfinite(mono).all():
        raise InvalidAudio(f"{what} holds non-finite samples (NaN or infinity)")
    return mono, int(sample_rate)


def prepare_reference(
    audio: np.ndarray, sample_rate: int, preprocess: bool, has_ref_text: bool
) -> tuple[np.ndarray, float]:
    """Turn a decoded reference clip into what the codec encodes, plus its original RMS.

    Resample to 24 kHz, measure and boost loudness, then (if preprocess) trim clips over 20 s
    when no transcript was given -- the cut would desync a given transcript -- and shorten
    silences. Drops the trailing partial codec frame. Raises InvalidAudio for an empty or
    entirely silent clip; a clip still over 20 s only logs a warning.
    """
    audio = np.asarray(audio, dtype=np.float32)
    if audio.ndim == 2:  # (channels, samples), as the reference accepts
        audio = audio.mean(axis=0)
    audio = np.ravel(audio)
    if audio.size == 0:
        raise InvalidAudio("reference audio holds no samples")
    if sample_rate != SAMPLE_RATE:
        # Imported here so the rest of this module stays usable without torch.
        from sidecar.audio.resample import resample

        audio = resample(audio, sample_rate, SAMPLE_RATE)

    audio, ref_rms = normalize_reference_loudness(audio)
    if ref_rms == 0.0:
        # The reference would go on and clone "silence" (output scaled by rms 0); refuse instead.
        raise InvalidAudio("reference audio is entirely silent")

    if preprocess:
        if not has_ref_text:
            audio = trim_long_audio(audio, SAMPLE_RATE)
        audio = remove_silence(
            audio, SAMPLE_RATE, mid_sil_ms=200, lead_sil_ms=100, trail_sil_ms=200
        )
        if audio.size == 0:
            raise InvalidAudio(
                "reference audio is silent (nothing above -50 dBFS) and is empty after silence "
                "removal; send a louder clip or turn preprocessing of the prompt off"
            )

    duration = audio.size / SAMPLE_RATE
    if duration > LONG_REFERENCE_S:
        logger.warning(
            "Reference audio is %.1fs long (>20s): slower generation, more memory and worse "
            "cloning are likely; 3-10 s is recommended.",
            duration,
        )

    audio = audio[: audio.size - audio.size % HOP_LENGTH]
    if audio.size == 0:
        raise InvalidAudio(
            f"reference audio is shorter than one codec frame ({HOP_LENGTH} samples at 24 kHz)"
        )
    return np.ascontiguousarray(audio, dtype=np.float32), ref_rms
