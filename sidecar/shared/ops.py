"""The protocol's vocabulary: its version, the ops and which way each goes, why an item
failed (`ErrorKind`), how a sidecar exits (`ExitCode`), and the error for a broken frame."""

from __future__ import annotations

import enum

PROTOCOL_VERSION = 5  # 2: `denoised`; 3: `align`, `aligned`; 4: `go`; 5: `generate.tier`
MAX_FRAME_BYTES = 64 * 1024 * 1024
PARKED = "parked"  # the `progress` stage of a spare that waits for `go` (sidecar/serve/spare.py)


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
    GO = "go"


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
    {Op.GENERATE, Op.ENCODE_VOICE, Op.TRANSCRIBE, Op.ALIGN, Op.PING, Op.SHUTDOWN, Op.GO}
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
