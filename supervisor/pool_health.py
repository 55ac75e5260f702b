"""What /health says of a sidecar pool: its status, one entry per sidecar slot (with its
spare), and its queue. The pool, its slots and its scheduler write these; /health, the metrics
collector and the job runner's warm-up read them. It imports nothing of the supervisor's."""

from __future__ import annotations

from typing import TypedDict


class SpareHealth(TypedDict):
    """A device's spare in its /health entry."""

    pid: int | None  # None to a client without a key
    state: str  # loading (what needs no device) or parked (waiting for `go`)
    memory_bytes: int | None  # its resident memory


class SidecarHealth(TypedDict):
    """A slot's entry in /health's `sidecars`."""

    id: str
    device: str
    pid: int | None
    state: str  # starting, ready, busy, reaped, backoff, failed or stopping
    restarts: int
    kills: dict[str, int]  # by reason
    last_kill: str | None
    last_error: str | None
    memory_bytes: int | None  # the sidecar's resident memory


class SlotHealth(SidecarHealth):
    """A slot's entry with its device's spare (None: the device has none)."""

    spare: SpareHealth | None


class QueueDepth(TypedDict):
    """The scheduler's books: what is admitted, queued and allowed."""

    tasks: int  # admitted and not finished
    reservations: int
    queued: int  # not yet sent to a sidecar
    audio_s: float  # estimated audio admitted and not yet generated
    limit_audio_s: float
    waiting_audio_s: dict[str, float]  # estimated audio not yet sent, by tier


class PoolHealth(TypedDict):
    status: str  # ok, degraded, starting, draining or failed
    sidecars: list[SlotHealth]
    queue: QueueDepth
