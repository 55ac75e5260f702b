"""The frame protocol between the supervisor and a sidecar: the one module both sides import.

Every message is one frame on the sidecar's stdin (supervisor -> sidecar) or on its private
frame channel, a duplicate of its original stdout (sidecar -> supervisor):

    0                   4                                         4 + length
    +-------------------+-----------------------------------------+
    | length            | payload                                 |
    | uint32 big-endian | one msgpack map {"op": "<op>", ...}     |
    +-------------------+-----------------------------------------+

A length over the cap (default 64 MiB) is rejected before a single payload byte is read. The
payload is decoded with raw=False, strict_map_key=True and no ext types, and then validated
against the schema of its op: exact keys, exact types. Anything else is a ProtocolError, and
the stream is never resynchronised; the supervisor kills the sidecar instead.

Audio travels as msgpack bin (16-bit little-endian PCM or float32 little-endian, named by the
`encoding` field), never base64. Codec tokens travel as int16 little-endian bin with a shape.

    sidecar -> supervisor           supervisor -> sidecar
    hello     (first, pre-import)   generate      (batch, items)
    progress  (load stage)          encode_voice  (batch, reference audio)
    ready     (loaded and warm)     ping          (nonce)
    step      (per denoising step)  shutdown
    result    (one per item)
    error     (one per failed item, or a load failure)
    encoded   (a voice prompt)
    done      (the batch is over)
    pong      (nonce)

This module depends on the standard library and msgpack only.
"""

from __future__ import annotations

import asyncio
import enum
import struct
from typing import IO, Any, Literal, TypedDict, Union

import msgpack

PROTOCOL_VERSION = 1
MAX_FRAME_BYTES = 64 * 1024 * 1024
HEADER = struct.Struct(">I")


class Op(str, enum.Enum):
    HELLO = "hello"
    PROGRESS = "progress"
    READY = "ready"
    STEP = "step"
    RESULT = "result"
    ERROR = "error"
    ENCODED = "encoded"
    DONE = "done"
    PONG = "pong"
    GENERATE = "generate"
    ENCODE_VOICE = "encode_voice"
    PING = "ping"
    SHUTDOWN = "shutdown"


FROM_SIDECAR = frozenset({Op.HELLO, Op.PROGRESS, Op.READY, Op.STEP, Op.RESULT, Op.ERROR, Op.ENCODED, Op.DONE, Op.PONG})
TO_SIDECAR = frozenset({Op.GENERATE, Op.ENCODE_VOICE, Op.PING, Op.SHUTDOWN})


class ErrorKind(str, enum.Enum):
    """Why an item (or a load) failed, as carried by an `error` frame."""

    INVALID_INPUT = "invalid_input"  # the request itself is wrong; retrying cannot help
    OUT_OF_MEMORY = "out_of_memory"  # failed alone, after the batch was split
    INTERNAL = "internal"  # an exception in the model code
    TOO_LARGE = "too_large"  # the result does not fit in one frame
    LOAD_FAILED = "load_failed"  # the model could not be loaded (sent before EXIT_LOAD_ERROR)
    PROTOCOL = "protocol"  # the sidecar received a frame it cannot accept


class ExitCode(enum.IntEnum):
    """Sidecar exit statuses the pool acts on."""

    OK = 0
    USAGE = 2
    LOAD_ERROR = 3  # the model cannot be loaded: the pool does not respawn
    PROTOCOL = 4  # the supervisor sent a malformed frame
    ORPHANED = 5  # the supervisor went away
    DEVICE_FATAL = 6  # a sticky device error; the process must be replaced


class ProtocolError(Exception):
    """A frame that is too large, truncated, undecodable, or does not match its op's schema."""


# ---------------------------------------------------------------- message types


class TokenArray(TypedDict):
    shape: list[int]  # [codebooks, frames]
    data: bytes  # int16 little-endian, row-major


class VoicePayload(TypedDict):
    tokens: TokenArray
    ref_text: str
    ref_rms: float | None


class _ItemBase(TypedDict):
    id: str
    text: str


class Item(_ItemBase, total=False):
    """One generation request; the optional keys are GenerationRequest's fields."""

    language: str | None
    instruct: str | None
    voice: VoicePayload | None
    duration: float | None
    speed: float | None
    num_step: int
    guidance_scale: float
    t_shift: float
    layer_penalty_factor: float
    position_temperature: float
    class_temperature: float
    denoise: bool
    postprocess_output: bool
    audio_chunk_duration: float
    audio_chunk_threshold: float
    seed: int | None
    return_tokens: bool


class Hello(TypedDict):
    op: Literal["hello"]
    pid: int
    protocol: int


class Progress(TypedDict):
    op: Literal["progress"]
    stage: str


class Ready(TypedDict):
    op: Literal["ready"]
    device: str
    model: str
    engine: str
    sample_rate: int
    memory: dict[str, int]


class Step(TypedDict):
    op: Literal["step"]
    batch: int
    step: int
    of: int


class Result(TypedDict):
    op: Literal["result"]
    batch: int
    id: str
    audio: bytes
    encoding: str  # "s16le" or "f32le"
    sample_rate: int
    seed: int | None
    tokens: list[TokenArray]
    timings: dict[str, float]


class Error(TypedDict):
    op: Literal["error"]
    batch: int | None
    id: str | None
    kind: str  # an ErrorKind value
    message: str


class Encoded(TypedDict):
    op: Literal["encoded"]
    batch: int
    id: str
    voice: VoicePayload


class Done(TypedDict):
    op: Literal["done"]
    batch: int
    stats: dict[str, float]


class Pong(TypedDict):
    op: Literal["pong"]
    nonce: int
    memory: dict[str, int]


class Generate(TypedDict):
    op: Literal["generate"]
    batch: int
    items: list[Item]
    encoding: str


class EncodeVoice(TypedDict):
    op: Literal["encode_voice"]
    batch: int
    id: str
    audio: bytes
    encoding: str
    sample_rate: int
    ref_text: str
    preprocess: bool


class Ping(TypedDict):
    op: Literal["ping"]
    nonce: int


class Shutdown(TypedDict):
    op: Literal["shutdown"]


Message = Union[Hello, Progress, Ready, Step, Result, Error, Encoded, Done, Pong, Generate, EncodeVoice, Ping, Shutdown]

AUDIO_ENCODINGS = ("s16le", "f32le")

# ---------------------------------------------------------------- schemas
#
# A schema maps each key to (kind, required). Kinds are checked by _check below; "?" marks a
# kind that may also be None. bool is never accepted where an int or float is meant.

Schema = dict[str, tuple[str, bool]]

ITEM_SCHEMA: Schema = {
    "id": ("str", True),
    "text": ("str", True),
    "language": ("str?", False),
    "instruct": ("str?", False),
    "voice": ("voice?", False),
    "duration": ("float?", False),
    "speed": ("float?", False),
    "num_step": ("int", False),
    "guidance_scale": ("float", False),
    "t_shift": ("float", False),
    "layer_penalty_factor": ("float", False),
    "position_temperature": ("float", False),
    "class_temperature": ("float", False),
    "denoise": ("bool", False),
    "postprocess_output": ("bool", False),
    "audio_chunk_duration": ("float", False),
    "audio_chunk_threshold": ("float", False),
    "seed": ("int?", False),
    "return_tokens": ("bool", False),
}

# Item keys that map one to one onto GenerationRequest fields.
ITEM_OPTIONS = tuple(k for k in ITEM_SCHEMA if k not in ("id", "voice"))

TOKENS_SCHEMA: Schema = {"shape": ("shape", True), "data": ("bytes", True)}
VOICE_SCHEMA: Schema = {"tokens": ("tokens", True), "ref_text": ("str", True), "ref_rms": ("float?", True)}

SCHEMAS: dict[Op, Schema] = {
    Op.HELLO: {"pid": ("int", True), "protocol": ("int", True)},
    Op.PROGRESS: {"stage": ("str", True)},
    Op.READY: {
        "device": ("str", True),
        "model": ("str", True),
        "engine": ("str", True),
        "sample_rate": ("int", True),
        "memory": ("intmap", True),
    },
    Op.STEP: {"batch": ("int", True), "step": ("int", True), "of": ("int", True)},
    Op.RESULT: {
        "batch": ("int", True),
        "id": ("str", True),
        "audio": ("bytes", True),
        "encoding": ("encoding", True),
        "sample_rate": ("int", True),
        "seed": ("int?", True),
        "tokens": ("tokens[]", True),
        "timings": ("floatmap", True),
    },
    Op.ERROR: {
        "batch": ("int?", True),
        "id": ("str?", True),
        "kind": ("kind", True),
        "message": ("str", True),
    },
    Op.ENCODED: {"batch": ("int", True), "id": ("str", True), "voice": ("voice", True)},
    Op.DONE: {"batch": ("int", True), "stats": ("floatmap", True)},
    Op.PONG: {"nonce": ("int", True), "memory": ("intmap", True)},
    Op.GENERATE: {"batch": ("int", True), "items": ("items", True), "encoding": ("encoding", True)},
    Op.ENCODE_VOICE: {
        "batch": ("int", True),
        "id": ("str", True),
        "audio": ("bytes", True),
        "encoding": ("encoding", True),
        "sample_rate": ("int", True),
        "ref_text": ("str", True),
        "preprocess": ("bool", True),
    },
    Op.PING: {"nonce": ("int", True)},
    Op.SHUTDOWN: {},
}

_ERROR_KINDS = frozenset(k.value for k in ErrorKind)


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _check(kind: str, value: object, where: str) -> None:
    """Raise ProtocolError unless value is of the named kind."""
    if kind.endswith("?"):
        if value is None:
            return
        kind = kind[:-1]
    ok: bool
    if kind == "str":
        ok = isinstance(value, str)
    elif kind == "int":
        ok = _is_int(value)
    elif kind == "float":
        ok = _is_number(value)
    elif kind == "bool":
        ok = isinstance(value, bool)
    elif kind == "bytes":
        ok = isinstance(value, bytes)
    elif kind == "encoding":
        ok = value in AUDIO_ENCODINGS
    elif kind == "kind":
        ok = value in _ERROR_KINDS
    elif kind == "shape":
        ok = isinstance(value, list) and len(value) == 2 and all(_is_int(n) and n >= 0 for n in value)
    elif kind in ("intmap", "floatmap"):
        test = _is_int if kind == "intmap" else _is_number
        ok = isinstance(value, dict) and all(isinstance(k, str) and test(v) for k, v in value.items())
    elif kind == "tokens":
        _check_map(TOKENS_SCHEMA, value, where)
        shape, data = value["shape"], value["data"]  # type: ignore[index]
        ok = len(data) == 2 * shape[0] * shape[1]
    elif kind == "tokens[]":
        ok = isinstance(value, list)
        for i, entry in enumerate(value if ok else []):  # type: ignore[arg-type]
            _check("tokens", entry, f"{where}[{i}]")
    elif kind == "voice":
        _check_map(VOICE_SCHEMA, value, where)
        ok = True
    elif kind == "items":
        ok = isinstance(value, list) and len(value) > 0
        for i, entry in enumerate(value if ok else []):  # type: ignore[arg-type]
            _check_map(ITEM_SCHEMA, entry, f"{where}[{i}]")
    else:  # pragma: no cover - a schema typo
        raise AssertionError(f"unknown kind {kind!r}")
    if not ok:
        raise ProtocolError(f"{where}: expected {kind}, got {type(value).__name__}")


def _check_map(schema: Schema, value: object, where: str) -> None:
    if not isinstance(value, dict):
        raise ProtocolError(f"{where}: expected a map, got {type(value).__name__}")
    unknown = value.keys() - schema.keys()
    if unknown:
        raise ProtocolError(f"{where}: unknown keys {sorted(map(str, unknown))}")
    for key, (kind, required) in schema.items():
        if key in value:
            _check(kind, value[key], f"{where}.{key}")
        elif required:
            raise ProtocolError(f"{where}: missing key {key!r}")


def validate(obj: object, allowed: frozenset[Op] = FROM_SIDECAR | TO_SIDECAR) -> Message:
    """Return obj as a typed message, or raise ProtocolError.

    `allowed` is the set of ops the receiving side accepts (FROM_SIDECAR on the supervisor).
    """
    if not isinstance(obj, dict):
        raise ProtocolError(f"a frame must hold a map, got {type(obj).__name__}")
    op_name = obj.get("op")
    try:
        op = Op(op_name)
    except ValueError:
        raise ProtocolError(f"unknown op {op_name!r}") from None
    if op not in allowed:
        raise ProtocolError(f"op {op.value!r} is not accepted in this direction")
    body = {k: v for k, v in obj.items() if k != "op"}
    _check_map(SCHEMAS[op], body, op.value)
    return obj  # type: ignore[return-value]


# ---------------------------------------------------------------- encoding and decoding


def _reject_ext(code: int, data: bytes) -> object:
    raise ProtocolError(f"msgpack ext type {code} is not allowed")


# Everything msgpack raises on malformed input. Timestamps (ext -1) bypass ext_hook but fail
# validation, since no schema accepts them.
_DECODE_ERRORS = (ValueError, TypeError, msgpack.FormatError, msgpack.StackError, msgpack.ExtraData, UnicodeDecodeError)


def encode_frame(message: Message | dict[str, Any], max_bytes: int = MAX_FRAME_BYTES) -> bytes:
    """Pack one message as a frame; a payload over max_bytes is a ProtocolError."""
    payload = msgpack.packb(message, use_bin_type=True)
    if len(payload) > max_bytes:
        raise ProtocolError(f"frame of {len(payload)} bytes exceeds the {max_bytes}-byte cap")
    return HEADER.pack(len(payload)) + payload


def payload_length(header: bytes, max_bytes: int = MAX_FRAME_BYTES) -> int:
    """The payload length a 4-byte header announces; over max_bytes is a ProtocolError."""
    (length,) = HEADER.unpack(header)
    if length > max_bytes:
        raise ProtocolError(f"frame of {length} bytes announced, over the {max_bytes}-byte cap")
    return int(length)


def decode_payload(payload: bytes, allowed: frozenset[Op] = FROM_SIDECAR | TO_SIDECAR) -> Message:
    """Unpack and validate one frame's payload."""
    try:
        obj = msgpack.unpackb(payload, raw=False, strict_map_key=True, ext_hook=_reject_ext, use_list=True)
    except ProtocolError:
        raise
    except _DECODE_ERRORS as exc:
        raise ProtocolError(f"undecodable frame: {type(exc).__name__}: {exc}") from None
    return validate(obj, allowed)


def write_frame(stream: IO[bytes], message: Message | dict[str, Any], max_bytes: int = MAX_FRAME_BYTES) -> None:
    """Write one frame to a binary stream and flush it."""
    stream.write(encode_frame(message, max_bytes))
    stream.flush()


def _read_exactly(stream: IO[bytes], n: int) -> bytes:
    chunks = []
    remaining = n
    while remaining:
        chunk = stream.read(remaining)
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def read_frame(
    stream: IO[bytes],
    max_bytes: int = MAX_FRAME_BYTES,
    allowed: frozenset[Op] = FROM_SIDECAR | TO_SIDECAR,
) -> Message | None:
    """Read one frame from a blocking binary stream; None at a clean end of stream."""
    header = _read_exactly(stream, HEADER.size)
    if not header:
        return None
    if len(header) < HEADER.size:
        raise ProtocolError("stream ended inside a frame header")
    length = payload_length(header, max_bytes)
    payload = _read_exactly(stream, length)
    if len(payload) < length:
        raise ProtocolError(f"stream ended inside a frame ({len(payload)} of {length} bytes)")
    return decode_payload(payload, allowed)


async def read_frame_async(
    reader: asyncio.StreamReader,
    max_bytes: int = MAX_FRAME_BYTES,
    allowed: frozenset[Op] = FROM_SIDECAR | TO_SIDECAR,
) -> Message | None:
    """read_frame for an asyncio stream."""
    try:
        header = await reader.readexactly(HEADER.size)
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            return None
        raise ProtocolError("stream ended inside a frame header") from None
    length = payload_length(header, max_bytes)
    try:
        payload = await reader.readexactly(length)
    except asyncio.IncompleteReadError as exc:
        raise ProtocolError(f"stream ended inside a frame ({len(exc.partial)} of {length} bytes)") from None
    return decode_payload(payload, allowed)


class FrameDecoder:
    """Incremental decoder: feed it bytes as they arrive, take whole validated messages out.

    `next_frame` returns one message, None while the next frame is incomplete, or raises
    ProtocolError at the first bad frame, after every good frame before it has been taken. A
    header announcing more than the cap fails at once, before anything is allocated for the
    payload. After a ProtocolError the decoder is dead: the stream cannot be resynchronised.
    """

    def __init__(self, max_bytes: int = MAX_FRAME_BYTES, allowed: frozenset[Op] = FROM_SIDECAR | TO_SIDECAR) -> None:
        self.max_bytes = max_bytes
        self.allowed = allowed
        self._buffer = bytearray()
        self._failed = False

    def feed(self, data: bytes) -> None:
        if self._failed:
            raise ProtocolError("decoder already failed; the stream cannot be resynchronised")
        self._buffer += data

    def next_frame(self) -> Message | None:
        if self._failed:
            raise ProtocolError("decoder already failed; the stream cannot be resynchronised")
        if len(self._buffer) < HEADER.size:
            return None
        try:
            length = payload_length(bytes(self._buffer[: HEADER.size]), self.max_bytes)
            end = HEADER.size + length
            if len(self._buffer) < end:
                return None
            payload = bytes(self._buffer[HEADER.size : end])
            del self._buffer[:end]
            return decode_payload(payload, self.allowed)
        except ProtocolError:
            self._failed = True
            self._buffer.clear()
            raise

    def frames(self) -> list[Message]:
        """Every complete frame buffered so far (raises at a bad one, as next_frame does)."""
        out = []
        while (message := self.next_frame()) is not None:
            out.append(message)
        return out

    @property
    def pending(self) -> int:
        """Bytes held of a frame not yet complete."""
        return len(self._buffer)
