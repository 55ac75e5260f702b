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
                                    go            (a parked spare may load onto its device)
    denoised  (the device is past the batch's steps)
    result    (one per item)
    error     (one per failed item, or a load failure)
    encoded   (a voice prompt)       transcribe    (ASR sidecars: audio, the text read)
    transcript (ASR: text, checks)   align         (ASR sidecars: audio, the text to time)
    aligned   (ASR: each word's time)
    done      (the batch is over)
    pong      (nonce)

Where each part lives: the ops, error kinds and exit codes in `ops.py`; one TypedDict per
message, by family, in `messages/` (payloads, lifecycle, generation, voices, hearing); framing,
decoding and validation in `frames.py`; the tier a batch runs at in `tiers.py`. This module
names them all, so that both sides import from one place. All of it depends on the standard
library and msgpack only.
"""

from __future__ import annotations

from sidecar.shared.frames import (
    HEADER,
    decode_payload,
    encode_frame,
    payload_length,
    read_frame,
    read_frame_async,
    validate,
    write_frame,
)
from sidecar.shared.messages import ITEM_OPTIONS, MESSAGE_TYPES, Message
from sidecar.shared.messages.asr import (
    Align,
    Aligned,
    AsrAudio,
    Transcribe,
    Transcript,
    WordTiming,
)
from sidecar.shared.messages.generation import Denoised, Done, Generate, Item, Result, Step
from sidecar.shared.messages.lifecycle import (
    Error,
    Go,
    Hello,
    Ping,
    Pong,
    Progress,
    Ready,
    Shutdown,
)
from sidecar.shared.messages.payloads import (
    QA_CHECKS,
    Encoding,
    QaCheck,
    TokenArray,
    UploadEncoding,
    VoicePayload,
)
from sidecar.shared.messages.voices import Encoded, EncodeVoice, VoiceToEncode
from sidecar.shared.ops import (
    FROM_SIDECAR,
    MAX_FRAME_BYTES,
    PARKED,
    PROTOCOL_VERSION,
    TO_SIDECAR,
    ErrorKind,
    ExitCode,
    Op,
    ProtocolError,
)
from sidecar.shared.tiers import Tier

__all__ = [
    "FROM_SIDECAR",
    "HEADER",
    "ITEM_OPTIONS",
    "MAX_FRAME_BYTES",
    "MESSAGE_TYPES",
    "PARKED",
    "PROTOCOL_VERSION",
    "QA_CHECKS",
    "TO_SIDECAR",
    "Align",
    "Aligned",
    "AsrAudio",
    "Denoised",
    "Done",
    "EncodeVoice",
    "Encoded",
    "Encoding",
    "Error",
    "ErrorKind",
    "ExitCode",
    "Generate",
    "Go",
    "Hello",
    "Item",
    "Message",
    "Op",
    "Ping",
    "Pong",
    "Progress",
    "ProtocolError",
    "QaCheck",
    "Ready",
    "Result",
    "Shutdown",
    "Step",
    "Tier",
    "TokenArray",
    "Transcribe",
    "Transcript",
    "UploadEncoding",
    "VoicePayload",
    "VoiceToEncode",
    "WordTiming",
    "decode_payload",
    "encode_frame",
    "payload_length",
    "read_frame",
    "read_frame_async",
    "validate",
    "write_frame",
]
