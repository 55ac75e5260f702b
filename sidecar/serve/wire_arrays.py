"""The arrays that travel in frames: tokens and audio go out as little-endian bytes; a reference
clip comes in as PCM or as a whole file, decoded here. The pipes themselves: `frame_pipe`."""

from __future__ import annotations

import numpy as np

from sidecar.shared.errors import InvalidAudio
from sidecar.shared.protocol import EncodeVoice, TokenArray


def tokens_to_wire(tokens: np.ndarray) -> TokenArray:
    array = np.ascontiguousarray(tokens, dtype="<i2")
    return {"shape": [int(array.shape[0]), int(array.shape[1])], "data": array.tobytes()}


def tokens_from_wire(tokens: TokenArray) -> np.ndarray:
    return np.frombuffer(tokens["data"], dtype="<i2").reshape(tokens["shape"]).astype(np.int64)


def audio_to_wire(audio: np.ndarray, encoding: str) -> bytes:
    # NaN or infinite samples (the `finite` check reports them) go out as silence, not as
    # whatever a cast of NaN to int16 happens to give.
    audio = np.nan_to_num(audio, nan=0.0, posinf=1.0, neginf=-1.0)
    if encoding == "f32le":
        return np.ascontiguousarray(audio, dtype="<f4").tobytes()
    return (np.clip(audio, -1.0, 1.0) * 32767.0).round().astype("<i2").tobytes()


def audio_from_wire(data: bytes, encoding: str) -> np.ndarray:
    if encoding == "f32le":
        return np.frombuffer(data, dtype="<f4").astype(np.float32)
    return np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0


def decode_reference(message: EncodeVoice) -> tuple[np.ndarray, int]:
    """The reference clip of an encode_voice frame as float32 samples and their rate.

    A whole file is decoded here, in the sidecar, so that parsing untrusted uploads can only
    ever crash a process the supervisor replaces. InvalidAudio when it cannot be decoded or is
    longer than the frame allows.
    """
    if message["encoding"] == "file":
        from sidecar.audio.processing import (
            read_audio,  # soundfile: only sidecars that encode voices need it
        )

        audio, sample_rate = read_audio(message["audio"])
    else:
        audio, sample_rate = (
            audio_from_wire(message["audio"], message["encoding"]),
            message["sample_rate"],
        )
    if sample_rate <= 0:
        raise InvalidAudio(f"reference audio has an invalid sample rate ({sample_rate})")
    limit = message.get("max_duration_s")
    seconds = len(audio) / sample_rate
    if limit and seconds > limit:
        raise InvalidAudio(
            f"reference audio is {seconds:.1f} s long; at most {limit:g} s is accepted (3-10 s works best)"
        )
    return audio, sample_rate
