"""sidecar/shared/protocol.py: framing, decoding and validation, including arbitrary bytes."""

from __future__ import annotations

import asyncio
import io
import struct
import tracemalloc

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sidecar.shared.protocol import (
    FROM_SIDECAR,
    HEADER,
    TO_SIDECAR,
    ProtocolError,
    Tier,
    decode_payload,
    encode_frame,
    read_frame,
    read_frame_async,
    validate,
)

TOKENS = {"shape": [8, 2], "data": bytes(32)}
MESSAGES = [
    {"op": "hello", "pid": 12, "protocol": 1},
    {"op": "progress", "stage": "model"},
    {
        "op": "ready",
        "device": "cpu",
        "model": "m",
        "engine": "null",
        "sample_rate": 24000,
        "memory": {"max_rss_bytes": 1},
    },
    {"op": "step", "batch": 1, "step": 3, "of": 32},
    {
        "op": "result",
        "batch": 1,
        "id": "a",
        "audio": b"\x00\x01",
        "encoding": "s16le",
        "sample_rate": 24000,
        "seed": None,
        "tokens": [TOKENS],
        "timings": {"audio_s": 0.5, "generate_s": 1},
    },
    {"op": "error", "batch": None, "id": None, "kind": "load_failed", "message": "no checkpoint"},
    {
        "op": "encoded",
        "batch": 2,
        "id": "v",
        "voice": {"tokens": TOKENS, "ref_text": "Hi.", "ref_rms": 0.1},
    },
    {"op": "done", "batch": 1, "stats": {"items": 2, "wall_s": 0.3}},
    {"op": "pong", "nonce": 4, "memory": {}},
    {"op": "denoised", "batch": 1},
    {
        "op": "generate",
        "batch": 1,
        "encoding": "f32le",
        "tier": "interactive",
        "items": [
            {
                "id": "a",
                "text": "Hello.",
                "seed": 3,
                "num_step": 8,
                "denoise": False,
                "speed": 1,
                "language": None,
                "voice": {"tokens": TOKENS, "ref_text": "Hi.", "ref_rms": None},
            }
        ],
    },
    {
        "op": "encode_voice",
        "batch": 3,
        "id": "v",
        "audio": b"\x00\x00",
        "encoding": "s16le",
        "sample_rate": 16000,
        "ref_text": "Hi.",
        "preprocess": True,
    },
    {
        "op": "align",
        "batch": 4,
        "id": "align-1",
        "audio": b"\x00\x00",
        "encoding": "s16le",
        "sample_rate": 24000,
        "text": "Stand clear.",
        "language": "en",
    },
    {
        "op": "aligned",
        "batch": 4,
        "id": "align-1",
        "words": [
            {"word": "Stand", "start": 0, "end": 0.4},
            {"word": "clear.", "start": 0.4, "end": 0.9},
        ],
    },
    {"op": "ping", "nonce": 1},
    {"op": "shutdown"},
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: m["op"])
def test_every_op_round_trips(message: dict) -> None:
    frame = encode_frame(message)
    assert struct.unpack(">I", frame[:4])[0] == len(frame) - 4
    assert read_frame(io.BytesIO(frame)) == message
    assert _frames_or_error(frame, [2]) == ([message], False)


GENERATE = {
    "op": "generate",
    "batch": 1,
    "encoding": "s16le",
    "tier": "bulk",
    "items": [{"id": "a", "text": "x"}],
}


def test_a_tier_travels_as_its_name() -> None:
    """The supervisor puts the enum itself in the frame; the sidecar reads back the name."""
    for tier in Tier:
        frame = encode_frame({**GENERATE, "tier": tier})
        decoded = read_frame(io.BytesIO(frame))
        assert decoded is not None and decoded["tier"] == tier.value  # type: ignore[typeddict-item]
        assert type(decoded["tier"]) is str  # type: ignore[typeddict-item]


BAD = [
    ([1, 2], "a frame must hold a map"),
    ({"op": "nope"}, "unknown op"),
    ({"op": "ping"}, "missing key 'nonce'"),
    ({"op": "ping", "nonce": 1, "extra": 2}, "unknown keys"),
    ({"op": "ping", "nonce": True}, "expected int"),
    ({"op": "ping", "nonce": 1.5}, "expected int"),
    ({"op": "step", "batch": 1, "step": "3", "of": 1}, "expected int"),
    ({"op": "denoised", "batch": "1"}, "expected int"),
    (
        {"op": "aligned", "batch": 1, "id": "a", "words": [{"word": "a", "start": 0, "end": "1"}]},
        "expected float",
    ),
    ({"op": "aligned", "batch": 1, "id": "a", "words": [{"word": "a", "start": 0}]}, "missing key"),
    (
        {"op": "result", **{k: v for k, v in MESSAGES[4].items() if k != "op"}, "encoding": "mp3"},
        "result.encoding: expected",
    ),
    ({"op": "error", "batch": 1, "id": "a", "kind": "whatever", "message": "m"}, "expected kind"),
    (
        {"op": "generate", "batch": 1, "encoding": "s16le", "tier": "bulk", "items": []},
        "expected items",
    ),
    (
        {"op": "generate", "batch": 1, "encoding": "s16le", "tier": "bulk", "items": [{"id": "a"}]},
        "missing key 'text'",
    ),
    (
        {
            "op": "generate",
            "batch": 1,
            "encoding": "s16le",
            "tier": "bulk",
            "items": [{"id": "a", "text": "x", "bogus": 1}],
        },
        "unknown keys",
    ),
    # The tier is one of the two names, as a string; the bool `join` it replaced is unknown.
    ({**GENERATE, "tier": "express"}, "generate.tier: expected Tier"),
    ({**GENERATE, "tier": True}, "generate.tier: expected Tier"),
    ({**GENERATE, "tier": "Interactive"}, "generate.tier: expected Tier"),
    ({k: v for k, v in GENERATE.items() if k != "tier"}, "missing key 'tier'"),
    ({**GENERATE, "join": True}, r"unknown keys \['join'\]"),
    (
        {
            "op": "encoded",
            "batch": 1,
            "id": "v",
            "voice": {"tokens": {"shape": [8, 2], "data": b"x"}, "ref_text": "", "ref_rms": 0},
        },
        "expected tokens",
    ),
    (
        {
            "op": "ready",
            "device": "cpu",
            "model": "m",
            "engine": "x",
            "sample_rate": 1,
            "memory": {"a": 1.5},
        },
        "memory.a: expected int",
    ),
]


@pytest.mark.parametrize(("obj", "why"), BAD, ids=[b[1] for b in BAD])
def test_validation_rejects(obj: object, why: str) -> None:
    with pytest.raises(ProtocolError, match=why):
        validate(obj)


def test_direction_is_enforced() -> None:
    with pytest.raises(ProtocolError, match="not accepted"):
        validate({"op": "shutdown"}, FROM_SIDECAR)
    with pytest.raises(ProtocolError, match="not accepted"):
        validate({"op": "hello", "pid": 1, "protocol": 1}, TO_SIDECAR)


@pytest.mark.parametrize(
    "payload",
    [
        b"\xc1",  # never-used byte
        msgpack.packb({1: 2}),  # non-string key
        msgpack.packb(msgpack.ExtType(5, b"x")),  # ext type
        msgpack.packb(
            {"op": "ping", "nonce": msgpack.Timestamp(1)}, datetime=False
        ),  # timestamp ext bypasses ext_hook
        b"\x91" * 3000,  # deeply nested arrays
        msgpack.packb({"op": "ping", "nonce": 1}) + b"\x00",  # trailing bytes
        b"\xa2\xff\xfe",  # invalid UTF-8 string
        b"\xdd\xff\xff\xff\xff",  # array32 claiming 4 G elements
    ],
)
def test_malformed_payloads_are_protocol_errors(payload: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode_payload(payload)


def test_length_over_cap_is_rejected_before_reading_the_payload() -> None:
    stream = io.BytesIO(HEADER.pack(1025) + b"\x80")
    with pytest.raises(ProtocolError, match="over the 1024-byte cap"):
        read_frame(stream, max_bytes=1024)
    assert stream.tell() == 4


def test_oversized_message_cannot_be_encoded() -> None:
    with pytest.raises(ProtocolError, match="exceeds"):
        encode_frame({"op": "progress", "stage": "x" * 100}, max_bytes=50)


def test_truncated_streams() -> None:
    frame = encode_frame({"op": "ping", "nonce": 1})
    assert read_frame(io.BytesIO(b"")) is None
    with pytest.raises(ProtocolError, match="inside a frame header"):
        read_frame(io.BytesIO(frame[:2]))
    with pytest.raises(ProtocolError, match="inside a frame"):
        read_frame(io.BytesIO(frame[:-1]))


def test_async_reader_matches_sync_reader() -> None:
    async def read_all(data: bytes) -> list:
        reader = asyncio.StreamReader()
        reader.feed_data(data)
        reader.feed_eof()
        out = []
        while (message := await read_frame_async(reader)) is not None:
            out.append(message)
        return out

    data = b"".join(encode_frame(m) for m in MESSAGES)
    assert asyncio.run(read_all(data)) == MESSAGES
    with pytest.raises(ProtocolError):
        asyncio.run(read_all(data + HEADER.pack(10**9)))


def test_async_reader_takes_the_good_frame_before_an_oversized_header() -> None:
    async def read() -> None:
        reader = asyncio.StreamReader()
        reader.feed_data(encode_frame({"op": "shutdown"}) + HEADER.pack(17) + bytes(17))
        reader.feed_eof()
        assert await read_frame_async(reader, max_bytes=16) == {"op": "shutdown"}
        with pytest.raises(ProtocolError, match="over the 16-byte cap"):
            await read_frame_async(reader, max_bytes=16)

    asyncio.run(read())


CAP = 4096


def _frames_or_error(data: bytes, cuts: list[int]) -> tuple[list, bool]:
    """What the supervisor's reader (read_frame_async) makes of `data` arriving in pieces cut at
    `cuts`: the frames it returned, and whether it then raised ProtocolError."""
    pieces, last = [], 0
    for cut in sorted(c % (len(data) + 1) for c in cuts):
        pieces.append(data[last:cut])
        last = cut
    pieces.append(data[last:])

    async def read() -> tuple[list, bool]:
        reader = asyncio.StreamReader()

        async def arrive() -> None:
            for piece in pieces:
                reader.feed_data(piece)
                await asyncio.sleep(0)  # the reader runs between pieces, as with a real pipe
            reader.feed_eof()

        arriving = asyncio.create_task(arrive())
        frames: list = []
        try:
            while (message := await read_frame_async(reader, max_bytes=CAP)) is not None:
                frames.append(message)
        except ProtocolError:
            return frames, True
        finally:
            await arriving
        return frames, False

    return asyncio.run(read())


valid_frames = st.lists(st.sampled_from(MESSAGES), max_size=4).map(
    lambda ms: b"".join(encode_frame(m) for m in ms)
)


@settings(max_examples=400, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(
    prefix=valid_frames,
    noise=st.binary(max_size=CAP * 2),
    cuts=st.lists(st.integers(min_value=0), max_size=6),
)
def test_arbitrary_bytes_give_valid_frames_or_one_protocol_error(
    prefix: bytes, noise: bytes, cuts: list[int]
) -> None:
    """Valid frames first, then anything: the supervisor's reader returns the valid ones, then at
    most one ProtocolError; the same frames however the bytes arrive; the sync reader (the
    sidecar's) agrees; memory stays bounded."""
    data = prefix + noise
    tracemalloc.start()
    try:
        whole, failed = _frames_or_error(data, [])
        split, split_failed = _frames_or_error(data, cuts)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * (len(data) + CAP) + 1_000_000
    assert split == whole and split_failed == failed
    assert all(validate(m) == m for m in whole)
    expected_prefix, _ = _frames_or_error(prefix, [])
    assert whole[: len(expected_prefix)] == expected_prefix
    stream = io.BytesIO(data)
    synced = []
    try:
        while (message := read_frame(stream, max_bytes=CAP)) is not None:
            synced.append(message)
        sync_failed = False
    except ProtocolError:
        sync_failed = True
    assert synced == whole and sync_failed == failed


def test_huge_announced_length_allocates_nothing() -> None:
    async def peak_while_reading() -> int:
        reader = asyncio.StreamReader()
        reader.feed_data(HEADER.pack(0xFFFFFFFF) + b"\x00" * 100)
        reader.feed_eof()
        tracemalloc.start()
        try:
            with pytest.raises(ProtocolError):
                await read_frame_async(reader, max_bytes=64 * 1024 * 1024)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    assert asyncio.run(peak_while_reading()) < 100_000
