"""One TypedDict per message, grouped by family. They are the schema too: `frames.validate`
checks a decoded frame against its op's TypedDict (exact keys, exact types; bool is never an
int) through typing introspection, so a field is declared in exactly one place."""

from __future__ import annotations

from typing import Any, get_args, get_type_hints

from sidecar.shared.messages.asr import Align, Aligned, Transcribe, Transcript
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
from sidecar.shared.messages.voices import Encoded, EncodeVoice
from sidecar.shared.ops import Op

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
    | Go
)
MESSAGE_TYPES: dict[Op, Any] = {
    Op(get_args(get_type_hints(t)["op"])[0]): t for t in get_args(Message)
}
# The GenerationRequest fields among an item's keys; `attempt` is the supervisor's, not the model's.
ITEM_OPTIONS = tuple(k for k in get_type_hints(Item) if k not in ("id", "text", "voice", "attempt"))
