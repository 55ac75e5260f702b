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
    progress  (load stage)          encode_voice  (batch, PCM or a file)
    ready     (loaded and warm)     ping          (nonce)
    step      (per denoising step)  shutdown
    denoised  (the device is past the batch's steps)
    result    (one per item)
    error     (one per failed item, or a load failure)
    encoded   (a voice prompt)       transcribe    (ASR sidecars: audio, the text read)
    transcript (ASR: text, checks)   align         (ASR sidecars: audio, the text to time)
    aligned   (ASR: each word's time)
    done      (the batch is over)
    pong      (nonce)

This module depends on the standard library and msgpack only.
"""

from __future__ import annotations

import asyncio
import enum
import functools
import struct
import types
from typing import (
    IO,
    Any,
    Literal,
    TypedDict,
    Union,
    get_args,
    get_origin,
    get_type_hints,
    is_typeddict,
)

import msgpack

PROTOCOL_VERSION = 3  # 2: `denoised`; 3: `align`, `aligned`
MAX_FRAME_BYTES = 64 * 1024 * 1024
HEADER = struct.Struct(">I")


class Op(str, enum.Enum):
    HELLO = "hello"
    PROGRESS = "progress"
    READY = "ready"
    STEP = "step"
    DENOISED = "denoised"
    RESULT = "result"
    ERROR = "error"
    ENCODED = "encoded"
    DONE = "done"
    PONG = "pong"
    GENERATE = "generate"
    ENCODE_VOICE = "encode_voice"
    TRANSCRIBE = "transcribe"
    TRANSCRIPT = "transcript"
    ALIGN = "align"
    ALIGNED = "aligned"
    PING = "ping"
    SHUTDOWN = "shutdown"


FROM_SIDECAR = frozenset(
    {
        Op.HELLO,
        Op.PROGRESS,
        Op.READY,
        Op.STEP,
        Op.DENOISED,
        Op.RESULT,
        Op.ERROR,
        Op.ENCODED,
        Op.TRANSCRIPT,
        Op.ALIGNED,
        Op.DONE,
        Op.PONG,
    }
)
TO_SIDECAR = frozenset(
    {Op.GENERATE, Op.ENCODE_VOICE, Op.TRANSCRIBE, Op.ALIGN, Op.PING, Op.SHUTDOWN}
)


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
    INTERNAL = 7  # a bug left a batch unanswerable; a fresh process takes over


class ProtocolError(Exception):
    """A frame that is too large, truncated, undecodable, or does not match its op's schema."""


# ---------------------------------------------------------------- message types
#
# One TypedDict per message. They are the schema too: `validate` checks a decoded frame
# against its op's TypedDict (exact keys, exact types; bool is never an int) through
# typing introspection, so a field is declared in exactly one place.

Encoding = Literal["s16le", "f32le"]  # audio: 16-bit PCM or float32, little-endian, mono
# A reference clip to encode may also come as a whole audio file ("file": WAV, FLAC, MP3 or
# OGG bytes as uploaded), so that untrusted files are only ever parsed in a sidecar.
UploadEncoding = Literal["s16le", "f32le", "file"]


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
    """One generation request; every optional key is the GenerationRequest field of that name."""

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
    attempt: int  # 1 for the first generation of this text, 2 for its first QA retry, ...


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


class Denoised(TypedDict):
    """The device has run the batch's last step; its decoding starts (the finisher sends it)."""

    op: Literal["denoised"]
    batch: int


# The names a result's `qa` may carry (metric labels come from this set only).
QA_CHECKS = (
    "finite",
    "clipping",
    "rms",
    "leading_silence",
    "trailing_silence",
    "internal_silence",
    "speech_rate",
    "wer",  # the ASR round trip (sidecar/audio/wer.py)
    "divergent_run",
)


class QaCheck(TypedDict):
    """One quality check of an item's audio (sidecar/audio/checks.py)."""

    passed: bool
    value: float


class _ResultBase(TypedDict):
    op: Literal["result"]
    batch: int
    id: str
    audio: bytes
    encoding: Encoding
    sample_rate: int
    seed: int | None
    tokens: list[TokenArray]  # when the item asked for return_tokens
    timings: dict[str, float]


class Result(_ResultBase, total=False):
    qa: dict[str, QaCheck]  # the quality checks of its audio, by name


class Error(TypedDict):
    op: Literal["error"]
    batch: int | None  # None: about the sidecar itself (a failed load, a bad frame)
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
    encoding: Encoding


class _EncodeVoiceBase(TypedDict):
    op: Literal["encode_voice"]
    batch: int
    id: str
    audio: bytes
    encoding: UploadEncoding
    sample_rate: int  # of PCM audio; ignored for "file", which says its own
    ref_text: str
    preprocess: bool


class EncodeVoice(_EncodeVoiceBase, total=False):
    max_duration_s: float  # refuse a clip longer than this once decoded (invalid_input)


class Transcribe(TypedDict):
    op: Literal["transcribe"]
    batch: int
    id: str
    audio: bytes
    encoding: UploadEncoding
    sample_rate: int  # of PCM audio; ignored for "file"
    text: str  # what was read, to compare with; "" to transcribe only (a clone reference)
    language: str | None


class Transcript(TypedDict):
    op: Literal["transcript"]
    batch: int
    id: str
    text: str
    qa: dict[str, QaCheck]  # `wer` and `divergent_run` against the text read (none without one)


class Align(TypedDict):
    op: Literal["align"]
    batch: int
    id: str
    audio: bytes
    encoding: UploadEncoding
    sample_rate: int  # of PCM audio; ignored for "file"
    text: str  # what was read: its words (split at white space) are timed
    language: str | None


class WordTiming(TypedDict):
    word: str
    start: float  # seconds from the start of the audio sent
    end: float


class Aligned(TypedDict):
    op: Literal["aligned"]
    batch: int
    id: str
    words: list[WordTiming]  # every word of the text once, in order, inside the audio


class Ping(TypedDict):
    op: Literal["ping"]
    nonce: int


class Shutdown(TypedDict):
    op: Literal["shutdown"]


Message = (
    Hello
    | Progress
    | Ready
    | Step
    | Denoised
    | Result
    | Error
    | Encoded
    | Transcript
    | Aligned
    | Done
    | Pong
    | Generate
    | EncodeVoice
    | Transcribe
    | Align
    | Ping
    | Shutdown
)
MESSAGE_TYPES: dict[Op, Any] = {
    Op(get_args(get_type_hints(t)["op"])[0]): t for t in get_args(Message)
}
# The GenerationRequest fields among an item's keys; `attempt` is the supervisor's, not the model's.
ITEM_OPTIONS = tuple(k for k in get_type_hints(Item) if k not in ("id", "text", "voice", "attempt"))

_ERROR_KINDS = frozenset(k.value for k in ErrorKind)


@functools.cache
def _fields(typed_dict: type) -> tuple[dict[str, Any], frozenset[str]]:
    return get_type_hints(typed_dict), typed_dict.__required_keys__  # type: ignore[attr-defined]


def _check(tp: Any, value: object, where: str) -> None:
    """Raise ProtocolError unless value is of type tp (a TypedDict, container, union or scalar)."""
    origin, args = get_origin(tp), get_args(tp)
    if origin is Literal:
        ok = value in args
    elif origin in (Union, types.UnionType):
        ok = any(_matches(arg, value, where) for arg in args)
    elif origin is list:
        ok = isinstance(value, list)
        for i, entry in enumerate(value if isinstance(value, list) else []):
            _check(args[0], entry, f"{where}[{i}]")
    elif origin is dict:
        ok = isinstance(value, dict)
        for key, entry in value.items() if isinstance(value, dict) else []:
            _check(str, key, f"{where} key")
            _check(args[1], entry, f"{where}.{key}")
    elif is_typeddict(tp):
        _check_map(tp, value, where)
        ok = True
    elif tp is type(None):
        ok = value is None
    elif tp is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = type(value) is tp  # str, bytes, bool: no subclasses (msgpack.Timestamp, say)
    if not ok:
        name = getattr(tp, "__name__", None) or str(tp).replace("typing.", "")
        raise ProtocolError(f"{where}: expected {name}, got {type(value).__name__}")


def _matches(tp: Any, value: object, where: str) -> bool:
    try:
        _check(tp, value, where)
    except ProtocolError:
        return False
    return True


def _check_map(typed_dict: type, value: object, where: str) -> None:
    if not isinstance(value, dict):
        raise ProtocolError(f"{where}: expected a map, got {type(value).__name__}")
    hints, required = _fields(typed_dict)
    unknown = value.keys() - hints.keys()
    if unknown:
        raise ProtocolError(f"{where}: unknown keys {sorted(map(str, unknown))}")
    missing = required - value.keys()
    if missing:
        raise ProtocolError(f"{where}: missing key {sorted(missing)[0]!r}")
    for key, entry in value.items():
        _check(hints[key], entry, f"{where}.{key}")
    if typed_dict is TokenArray:
        shape, data = value["shape"], value["data"]
        if len(shape) != 2 or min(shape) < 0 or len(data) != 2 * shape[0] * shape[1]:
            raise ProtocolError(
                f"{where}: expected tokens, got shape {shape} with {len(data)} bytes"
            )


def validate(obj: object, allowed: frozenset[Op] = FROM_SIDECAR | TO_SIDECAR) -> Message:
    """Return obj as a typed message, or raise ProtocolError.

    `allowed` is the set of ops the receiving side accepts (FROM_SIDECAR on the supervisor).
    """
    if not isinstance(obj, dict):
        raise ProtocolError(f"a frame must hold a map, got {type(obj).__name__}")
    try:
        op = Op(obj.get("op"))
    except ValueError:
        raise ProtocolError(f"unknown op {obj.get('op')!r}") from None
    if op not in allowed:
        raise ProtocolError(f"op {op.value!r} is not accepted in this direction")
    _check_map(MESSAGE_TYPES[op], obj, op.value)
    if op is Op.ERROR and obj["kind"] not in _ERROR_KINDS:
        raise ProtocolError(f"error.kind: expected kind, got {obj['kind']!r}")
    if op is Op.GENERATE and not obj["items"]:
        raise ProtocolError("generate.items: expected items, got an empty list")
    return obj  # type: ignore[return-value]


# ---------------------------------------------------------------- encoding and decoding


def _reject_ext(code: int, data: bytes) -> object:
    raise ProtocolError(f"msgpack ext type {code} is not allowed")


# Everything msgpack raises on malformed input. Timestamps (ext -1) bypass ext_hook but fail
# validation, since no schema accepts them.
_DECODE_ERRORS = (
    ValueError,
    TypeError,
    msgpack.FormatError,
    msgpack.StackError,
    msgpack.ExtraData,
    UnicodeDecodeError,
)


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
        obj = msgpack.unpackb(
            payload, raw=False, strict_map_key=True, ext_hook=_reject_ext, use_list=True
        )
    except ProtocolError:
        raise
    except _DECODE_ERRORS as exc:
        raise ProtocolError(f"undecodable frame: {type(exc).__name__}: {exc}") from None
    return validate(obj, allowed)


def write_frame(
    stream: IO[bytes], message: Message | dict[str, Any], max_bytes: int = MAX_FRAME_BYTES
) -> None:
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
        raise ProtocolError(
            f"stream ended inside a frame ({len(exc.partial)} of {length} bytes)"
        ) from None
    return decode_payload(payload, allowed)
