"""A sidecar's life: hello before the heavy imports, load progress, ready, liveness pings,
errors about an item or about the sidecar itself, shutdown, and `go` for a parked spare."""

from __future__ import annotations

from typing import Literal, TypedDict


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


class Error(TypedDict):
    op: Literal["error"]
    batch: int | None  # None: about the sidecar itself (a failed load, a bad frame)
    id: str | None
    kind: str  # an ErrorKind value
    message: str


class Ping(TypedDict):
    op: Literal["ping"]
    nonce: int


class Pong(TypedDict):
    op: Literal["pong"]
    nonce: int
    memory: dict[str, int]


class Shutdown(TypedDict):
    op: Literal["shutdown"]


class Go(TypedDict):
    """A spare parked before touching its device (`--park`) may go on loading: the device is its."""

    op: Literal["go"]
