"""Frames on the wire: a 4-byte big-endian length, then one msgpack map, validated against its
op's message type before anyone reads it (the layout and the rules: sidecar/shared/protocol.py)."""

from __future__ import annotations

import asyncio
import enum
import functools
import struct
import types
from typing import IO, Any, Literal, Union, get_args, get_origin, get_type_hints, is_typeddict

import msgpack

from sidecar.shared.messages import MESSAGE_TYPES, Message
from sidecar.shared.messages.payloads import TokenArray
from sidecar.shared.ops import (
    FROM_SIDECAR,
    MAX_FRAME_BYTES,
    TO_SIDECAR,
    ErrorKind,
    Op,
    ProtocolError,
)

HEADER = struct.Struct(">I")
_ERROR_KINDS = frozenset(k.value for k in ErrorKind)


@functools.cache
def _fields(typed_dict: type) -> tuple[dict[str, object], frozenset[str]]:
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
    else:
        ok = _is_scalar(tp, value)
    if not ok:
        name = getattr(tp, "__name__", None) or str(tp).replace("typing.", "")
        raise ProtocolError(f"{where}: expected {name}, got {type(value).__name__}")


def _is_scalar(tp: Any, value: object) -> bool:
    """Whether value is of the scalar type tp: None, a number, an enum's value, str, bytes, bool."""
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return isinstance(value, str) and value in {member.value for member in tp}
    if tp is type(None):
        return value is None
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return type(value) is tp  # str, bytes, bool: no subclasses (msgpack.Timestamp, say)


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


def encode_frame(message: Message, max_bytes: int = MAX_FRAME_BYTES) -> bytes:
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


def write_frame(stream: IO[bytes], message: Message, max_bytes: int = MAX_FRAME_BYTES) -> None:
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
