"""The settings each subsystem reads: one small frozen section per subsystem, cut from `Settings`.

`Settings` is parsed once (defaults, OMNIVOICE_* variables, flags) and checked as a whole; each
class then takes only its section (`settings.http`, `settings.supervision`, ...), so what a class
can read is what its section declares. A section's fields carry the names of the settings they
come from; a few are derived, said beside them.

Membership follows who reads a setting (a grep of `supervisor/` outside `settings/`):

- `http`: the HTTP edge (supervisor/http/): where it listens, connection and body deadlines,
  caps on connections and unsent answers, uploads, WebSocket sessions, request deadlines.
- `sidecar`: what a sidecar is started with and where (supervision/sidecar_command.py,
  model_check.py, result_cache.py's checkpoint identity).
- `supervision`: how sidecars are watched, restarted, reaped and drained, and which of them
  interactive work joins (supervision/pool.py, slot.py, session.py, spare.py, shutdown.py); it
  holds the `sidecar` section, since the pool starts sidecars.
- `scheduling`: batches and admission (supervision/scheduler.py, jobs/intake.py).
- `speech`: how a request becomes chunks and is checked (speech/: plan, script, cost, quality,
  the result cache, the clone cache, the ASR deadline).
- `jobs`: the store, retention, leases and callbacks (supervisor/jobs/).
- `server`: the process itself: its state directory, keys, log, pid file and traces (commands/).

A setting read by two subsystems sits in both, rather than in a shared section that would
hand each of them settings it never reads: `max_queue_audio_s` (the scheduler's admission
limit, and speech's cost check of one request against it), `max_input_chars` (the edge's body
limit, and the speech request's bound), `max_job_items` (the edge's body limit, and the jobs'),
`qa_thresholds` and `asr_model` (what a sidecar runs, and what a result-cache key names). Each
copy is the same value, cut from the one `Settings`. `data_dir` is the server's as given and
the sidecar's as resolved (the compile cache's default home).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, TypeVar

from supervisor.settings.fields import Fields

MB = 1024 * 1024


@dataclass(frozen=True)
class HttpSettings:
    """The HTTP edge: supervisor/http/."""

    host: str
    port: int
    allowed_hosts: tuple[str, ...]
    header_timeout_s: float
    body_timeout_s: float
    body_deadline_s: float
    max_connections: int
    max_connections_per_peer: int
    send_timeout_s: float
    max_unsent_mb: float
    max_unsent_mb_per_key: float
    max_upload_mb: float
    max_reference_s: float
    max_input_chars: int
    max_job_items: int
    request_timeout_s: float
    stream_buffer_chars: int
    stream_sessions: int
    stream_sessions_per_key: int
    stream_auth_s: float
    stream_idle_s: float


@dataclass(frozen=True)
class SidecarSettings:
    """What a sidecar is started with, and where: supervision/sidecar_command.py."""

    model: str
    asr_model: str
    engine: str
    dtype: str
    devices: str
    gpu_inferer: int | None
    warmup_steps: int
    interactive_step_tokens: int
    attention: str
    interactive_stream: str
    compile_cache_dir: str
    qa_thresholds: str
    max_frame_mb: int
    data_dir: str  # derived: the state directory in effect (Settings.resolved_data_dir)

    @property
    def max_frame_bytes(self) -> int:
        return self.max_frame_mb * MB


@dataclass(frozen=True)
class SupervisionSettings:
    """How sidecars are watched, restarted, reaped and drained: supervision/."""

    load_timeout_s: float
    load_total_s: float
    heartbeat_timeout_s: float
    ping_interval_s: float
    ping_timeout_s: float
    stop_timeout_s: float
    memory_reclaim_s: float
    memory_slack_mb: int
    max_restarts: int
    restart_window_s: float
    backoff_initial_s: float
    backoff_max_s: float
    spare_sidecars: str
    idle_reap_s: float
    min_warm: int
    failed_exit_s: float
    drain_s: float
    systemd_ready: str
    light_joins: bool
    sidecar: SidecarSettings  # derived: the pool starts them


@dataclass(frozen=True)
class SchedulingSettings:
    """Batches and admission: supervision/scheduler.py, jobs/intake.py."""

    max_batch_size: int
    max_batch_tokens: int
    max_batch_latency_ms: float
    max_queue_audio_s: float
    max_queue_share_per_key: float
    several_owners: bool  # derived: the keys belong to more than one owner (the tenancy)


@dataclass(frozen=True)
class SpeechSettings:
    """How a request becomes chunks, and is bounded and checked: speech/."""

    max_input_chars: int
    max_request_audio_s: float
    max_queue_audio_s: float
    chunk_s: float
    normalize: bool
    text_chunk_words: int
    max_continuity_audio_tokens: int
    max_continuity_text_words: int
    strict_instructions: bool
    default_response_format: str
    num_step: int
    qa_retries: int
    qa_thresholds: str  # also the sidecar's: a result-cache key names the checks made
    asr_model: str  # also the sidecar's: the ASR round trip is a check, too
    asr_timeout_s: float
    clone_cache_size: int
    cache_dir: str  # derived: the result cache's directory in effect (Settings.resolved_cache_dir)
    cache_max_bytes: int
    cache_shared: bool


@dataclass(frozen=True)
class JobSettings:
    """Jobs: their store, retention, leases and callbacks: supervisor/jobs/."""

    job_retention_s: float
    max_job_items: int
    store: str
    lease_s: float
    callback_allow: tuple[str, ...]
    callback_secret: str
    callback_attempts: int
    callback_backoff_s: float
    callback_timeout_s: float
    callback_host_concurrency: int
    callback_concurrency: int
    book_encoders: int


@dataclass(frozen=True)
class ServerSettings:
    """The server process: its state directory, keys, log, pid file and traces: commands/."""

    api_keys: tuple[str, ...]
    api_key_file: str | None
    data_dir: str
    pid_file: str | None
    log_dir: str | None
    log_run_id: str | None
    log_file: str | None
    log_level: str
    trace_file: str | None


SECTIONS: tuple[type[Any], ...] = (
    HttpSettings,
    SidecarSettings,
    SupervisionSettings,
    SchedulingSettings,
    SpeechSettings,
    JobSettings,
    ServerSettings,
)

S = TypeVar("S")


def cut(section: type[S], settings: Fields, **derived: Any) -> S:
    """`section` with each field's value from `settings`, but those given in `derived`."""
    values = {
        f.name: derived[f.name] if f.name in derived else getattr(settings, f.name)
        for f in dataclasses.fields(section)  # type: ignore[arg-type]
    }
    return section(**values)
