"""supervisor/speech/audio/formats.py: every format decodes, whole or streamed, to the right rate and length."""

from __future__ import annotations

import base64
import io
import json
import math
import struct
import wave

import av
import pytest
import soundfile as sf

from supervisor.speech.audio import formats

RATE = 24000


def tone(seconds: float) -> bytes:
    count = int(seconds * RATE)
    return struct.pack(
        f"<{count}h", *(int(8000 * math.sin(2 * math.pi * 220 * i / RATE)) for i in range(count))
    )


def decode_av(data: bytes) -> tuple[int, float]:
    """(sample rate, seconds) as libav decodes the file, to the last frame."""
    with av.open(io.BytesIO(data)) as container:
        stream = container.streams.audio[0]
        samples = sum(frame.samples for frame in container.decode(stream))
        return stream.codec_context.sample_rate, samples / stream.codec_context.sample_rate


# libav decodes Opus at 48 kHz whatever went in (the Ogg header records 24 kHz); AAC and MP3
# in ADTS and raw MPEG carry the encoder's priming and padding, a few tens of milliseconds.
DECODED_RATE = {"mp3": RATE, "opus": 48000, "aac": RATE, "flac": RATE, "wav": RATE}
SLACK_S = {"mp3": 0.08, "opus": 0.01, "aac": 0.1, "flac": 0.0, "wav": 0.0}


@pytest.mark.parametrize("fmt", ["mp3", "opus", "aac", "flac", "wav"])
def test_a_whole_file_decodes_to_its_length(fmt: str) -> None:
    rate, seconds = decode_av(formats.encode(fmt, tone(1.5)))
    assert rate == DECODED_RATE[fmt]
    assert 1.5 <= seconds <= 1.5 + SLACK_S[fmt] + 1e-9


@pytest.mark.parametrize("fmt", ["mp3", "opus", "aac", "flac", "wav"])
def test_a_stream_fed_chunk_by_chunk_decodes_to_the_end(fmt: str) -> None:
    encoder = formats.encoder(fmt, RATE)
    parts = [
        encoder.feed(tone(1.0)),
        encoder.feed(tone(0.5)),
        encoder.feed(tone(2.0)),
        encoder.finish(),
    ]
    # The first chunk's audio goes out before the second arrives; FLAC alone is kept whole.
    assert bool(parts[0]) is (fmt != "flac")
    rate, seconds = decode_av(b"".join(parts))
    assert rate == DECODED_RATE[fmt] and 3.5 <= seconds <= 3.5 + SLACK_S[fmt] + 1e-9


@pytest.mark.parametrize("fmt", ["mp3", "opus", "flac", "wav"])
def test_libsndfile_reads_whole_files_too(fmt: str) -> None:
    audio, rate = sf.read(io.BytesIO(formats.encode(fmt, tone(1.0))))
    assert rate == RATE and abs(len(audio) / rate - 1.0) < 0.07


def test_wav_headers_whole_and_open_ended() -> None:
    pcm = tone(0.5)
    whole = formats.encode("wav", pcm)
    with wave.open(io.BytesIO(whole)) as w:
        assert (w.getframerate(), w.getsampwidth(), w.getnchannels(), w.getnframes()) == (
            RATE,
            2,
            1,
            len(pcm) // 2,
        )
    streamed = formats.encoder("wav", RATE)
    data = streamed.feed(pcm) + streamed.feed(pcm) + streamed.finish()
    assert data[4:8] == data[40:44] == b"\xff\xff\xff\xff" and data[44:] == pcm + pcm
    audio, rate = sf.read(io.BytesIO(data))
    assert rate == RATE and len(audio) == len(pcm)  # libsndfile reads an open-ended WAV to its end


def test_pcm_is_the_samples_themselves() -> None:
    pcm = tone(0.25)
    assert formats.encode("pcm", pcm) == pcm
    encoder = formats.encoder("pcm", RATE)
    assert encoder.feed(pcm) + encoder.finish() == pcm


def test_an_odd_byte_count_never_splits_a_sample() -> None:
    encoder = formats.encoder("mp3", RATE)
    rate, seconds = decode_av(encoder.feed(tone(0.5) + b"\x01") + encoder.finish())
    assert rate == RATE and 0.5 <= seconds <= 0.5 + SLACK_S["mp3"]


def test_sse_events_carry_the_audio_in_slices_then_usage() -> None:
    audio = bytes(range(256)) * 500
    events = list(formats.sse_deltas(audio))
    assert len(events) == math.ceil(len(audio) / formats.SSE_SLICE)
    payloads = [json.loads(e.decode().removeprefix("data: ")) for e in events]
    assert all(e.endswith(b"\n\n") for e in events) and {p["type"] for p in payloads} == {
        "speech.audio.delta"
    }
    assert b"".join(base64.b64decode(p["audio"]) for p in payloads) == audio
    done = json.loads(
        formats.sse_done({"input_tokens": 1, "output_tokens": 2, "total_tokens": 3}).decode()[6:]
    )
    assert done == {
        "type": "speech.audio.done",
        "usage": {"input_tokens": 1, "output_tokens": 2, "total_tokens": 3},
    }


def test_a_flac_answer_of_several_chunks_reads_with_soundfile_at_its_real_length() -> None:
    """Issue 19.5: a FLAC whose header said "length unknown" failed in soundfile ("array is too
    big"); the response's FLAC encoder now keeps the chunks and writes the real length."""
    encoder = formats.encoder("flac", RATE)
    pieces = [encoder.feed(tone(1.0)), encoder.feed(tone(1.0)), encoder.feed(tone(1.0))]
    data = b"".join([*pieces, encoder.finish()])
    assert pieces == [b"", b"", b""]  # nothing goes out before the header can be complete
    info = data[8:42]
    assert data[:4] == b"fLaC" and int.from_bytes(info[10:18], "big") & (2**36 - 1) == 3 * RATE
    audio, rate = sf.read(io.BytesIO(data), dtype="int16")
    assert rate == RATE and len(audio) == 3 * RATE
    assert decode_av(data) == (RATE, 3.0)
