"""The one settings object: defaults in code, then OMNIVOICE_* variables, then command-line flags.

Each field of `Settings` declares its default, its type and its help text once. The
environment variable (OMNIVOICE_<NAME>), the `--flag`, the `--help` text and the settings table
in the docs are all derived from those declarations. Nothing writes to a Settings after startup;
facts learned at run time (sample rate, devices found) live elsewhere.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

ENV_PREFIX = "OMNIVOICE_"


class SettingsError(ValueError):
    """A setting with a value it cannot take; the message names the flag and the variable."""


def setting(
    default: Any, help: str, *, flag: str | None = None, metavar: str | None = None, choices: tuple[str, ...] | None = None
) -> Any:
    return field(default=default, metadata={"help": help, "flag": flag, "metavar": metavar, "choices": choices})


@dataclass(frozen=True)
class Settings:
    # --- server
    model: str = setting("", "checkpoint directory or Hugging Face id (not needed with --engine null)", metavar="DIR_OR_HF_ID")
    host: str = setting("127.0.0.1", "address to listen on")
    port: int = setting(9194, "port to listen on")
    devices: str = setting("auto", "auto (every visible GPU, else the CPU), cpu, or GPU indices such as 0,1")
    api_keys: tuple[str, ...] = setting((), "API key clients must send as a Bearer token; repeatable (env: comma-separated)", flag="--api-key", metavar="KEY")
    data_dir: str = setting("", "state directory (default: $STATE_DIRECTORY, else ~/.local/state/omnivoice-supervisor)")
    pid_file: str | None = setting(None, "write the server's pid to this file")
    log_dir: str | None = setting(None, "also write the log to DIR/omnivoice-supervisor.log")
    log_level: str = setting("info", "log level", choices=("debug", "info", "warning", "error"))
    # --- HTTP API
    max_input_chars: int = setting(4096, "longest speech 'input' (and 'instructions') accepted, in characters; longer is a 400")
    chunk_s: float = setting(15.0, "long input is split into chunks of about this many seconds of estimated audio (input up to twice this stays whole)")
    max_upload_mb: float = setting(10.0, "largest reference audio upload (saved voices, one-shot clones), in MiB; larger is a 413")
    max_reference_s: float = setting(30.0, "longest reference audio accepted for a voice, in seconds")
    clone_cache_size: int = setting(32, "one-shot clone prompts kept in memory (least recently used first out)")
    # --- sidecars
    engine: str = setting("omnivoice", "what sidecars run: the model, or silence for overhead benchmarks", choices=("omnivoice", "null"))
    dtype: str = setting("auto", "model dtype: auto (bfloat16 on GPU, float32 on CPU), float32, bfloat16, float16")
    warmup_steps: int = setting(2, "denoising steps of the warm-up generation before a sidecar reports ready (0: none)")
    max_frame_mb: int = setting(64, "largest frame accepted on a sidecar pipe, in MiB")
    load_timeout_s: float = setting(120.0, "kill a loading sidecar silent for this long (each progress frame re-arms it)")
    load_total_s: float = setting(600.0, "kill a sidecar not ready this long after it started")
    heartbeat_timeout_s: float = setting(60.0, "kill a busy sidecar that sends no frame for this long")
    ping_interval_s: float = setting(30.0, "ping an idle sidecar after this long without a frame")
    ping_timeout_s: float = setting(10.0, "kill an idle sidecar that does not answer a ping within this long")
    stop_timeout_s: float = setting(10.0, "after asking a sidecar to shut down, SIGKILL it after this long")
    memory_reclaim_s: float = setting(60.0, "after a kill, wait this long for the GPU's memory to come back, else mark the GPU failed")
    memory_slack_mb: int = setting(512, "GPU memory above the pre-start level that still counts as 'back'")
    max_restarts: int = setting(5, "restart intensity: at most this many unplanned restarts per device ...")
    restart_window_s: float = setting(600.0, "... within this window; beyond it the device is marked failed")
    backoff_initial_s: float = setting(1.0, "delay before the second respawn in a row (the first is immediate); doubles after each")
    backoff_max_s: float = setting(60.0, "longest delay between respawns")
    idle_reap_s: float = setting(0.0, "stop a sidecar idle this long to free its device; the next request starts it (0: never)")
    min_warm: int = setting(0, "with idle reaping, keep at least this many sidecars running")
    failed_exit_s: float = setting(30.0, "when every device has failed, exit non-zero after this long (for systemd to restart)")
    # --- scheduling
    max_batch_size: int = setting(64, "most tasks in one batch")
    max_batch_tokens: int = setting(32768, "token budget of one batch (estimated target frames plus text)")
    max_batch_latency_ms: float = setting(50.0, "a busy sidecar's next batch is sent ahead once full, or once its oldest task waited this long")
    max_queue_audio_s: float = setting(600.0, "admission limit per usable sidecar, in seconds of estimated audio; beyond it 429")
    drain_s: float = setting(60.0, "on SIGTERM, let work in flight finish for this long before stopping")
    systemd_ready: str = setting("first", "under systemd, say READY=1 once the first sidecar is ready, or once all are", choices=("first", "all"))
    num_step: int = setting(32, "default denoising steps per request")
    # --- jobs
    job_retention_s: float = setting(604800.0, "remove a job and its result files this long after its last item ended (0: keep forever)")
    max_job_items: int = setting(10000, "most items in one job (POST /v1/jobs)")
    test_faults: bool = setting(False, "TEST ONLY: sidecars honour fault markers (sidecar/faults.py) and SIGUSR2 wedges the event loop; never in production")

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
                raise SettingsError(f"{flag_of(f)} ({env_of(f)}) must not be negative, got {value}")
            choices = f.metadata.get("choices")
            if choices and value not in choices:
                raise SettingsError(f"{flag_of(f)} ({env_of(f)}) must be one of {', '.join(choices)}, got {value!r}")
        if not 0 < self.port < 65536:
            raise SettingsError(f"--port must be between 1 and 65535, got {self.port}")
        if not re.fullmatch(r"auto|cpu|\d+(,\d+)*", self.devices):
            raise SettingsError(f"--devices must be auto, cpu or indices like 0,1; got {self.devices!r}")
        for name in ("max_batch_size", "max_batch_tokens", "max_frame_mb", "max_restarts", "max_input_chars", "max_job_items"):
            if getattr(self, name) < 1:
                raise SettingsError(f"--{name.replace('_', '-')} must be at least 1")
        if self.chunk_s < 1:
            raise SettingsError("--chunk-s must be at least 1 second")
        if self.engine == "omnivoice" and not self.model:
            raise SettingsError("--model (OMNIVOICE_MODEL) is required unless --engine null")

    @property
    def max_frame_bytes(self) -> int:
        return self.max_frame_mb * 1024 * 1024

    def resolved_data_dir(self) -> str:
        if self.data_dir:
            return self.data_dir
        state = os.environ.get("STATE_DIRECTORY")
        if state:
            return state.split(":")[0]
        return os.path.expanduser("~/.local/state/omnivoice-supervisor")

    def public(self) -> dict[str, Any]:
        """The settings in effect, for /health; API keys are never shown."""
        values = dataclasses.asdict(self)
        values["api_keys"] = len(self.api_keys)
        return values

    # ------------------------------------------------------------ sources

    @classmethod
    def from_sources(cls, flags: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None) -> Settings:
        """Defaults, overridden by OMNIVOICE_* variables, overridden by flags (attribute names)."""
        environ = os.environ if environ is None else environ
        hints = typing.get_type_hints(cls)
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            raw = environ.get(env_of(f))
            if raw is not None:
                values[f.name] = _parse_env(f, hints[f.name], raw)
        for name, value in (flags or {}).items():
            values[name] = tuple(value) if isinstance(value, list) else value
        return cls(**values)

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """One flag per field; flags left out fall through to the environment and the default."""
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            kind = hints[f.name]
            shown = ",".join(f.default) if isinstance(f.default, tuple) else f.default
            help_text = f"{f.metadata['help']} [env {env_of(f)}; default: {shown}]".replace("%", "%%")
            options: dict[str, Any] = {"dest": f.name, "default": argparse.SUPPRESS, "help": help_text}
            if f.metadata.get("metavar"):
                options["metavar"] = f.metadata["metavar"]
            if kind is bool:
                options["action"] = argparse.BooleanOptionalAction
            elif kind == tuple[str, ...]:
                options["action"] = "append"
            else:
                options["type"] = _scalar_type(kind)
                options["choices"] = f.metadata.get("choices")
            parser.add_argument(flag_of(f), **options)

    @classmethod
    def from_namespace(cls, namespace: argparse.Namespace, environ: Mapping[str, str] | None = None) -> Settings:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls.from_sources({k: v for k, v in vars(namespace).items() if k in names}, environ)

    @classmethod
    def table(cls) -> list[tuple[str, str, str, str]]:
        """(flag, variable, default, help) per field, for the docs."""
        return [(flag_of(f), env_of(f), repr(f.default), f.metadata["help"]) for f in dataclasses.fields(cls)]


def flag_of(f: dataclasses.Field) -> str:  # type: ignore[type-arg]
    return f.metadata.get("flag") or "--" + f.name.replace("_", "-")


def env_of(f: dataclasses.Field) -> str:  # type: ignore[type-arg]
    return ENV_PREFIX + f.name.upper()


def _scalar_type(kind: Any) -> Any:
    if kind in (int, float, str):
        return kind
    args = [a for a in typing.get_args(kind) if a is not type(None)]
    return args[0] if args else str


def _parse_env(f: dataclasses.Field, kind: Any, raw: str) -> Any:  # type: ignore[type-arg]
    name = env_of(f)
    if kind is bool:
        lowered = raw.strip().lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off", ""):
            return False
        raise SettingsError(f"{name} must be true or false, got {raw!r}")
    if kind == tuple[str, ...]:
        return tuple(part.strip() for part in raw.split(",") if part.strip())
    scalar = _scalar_type(kind)
    if scalar is str:
        return raw if raw or kind is str else None
    try:
        return scalar(raw)
    except ValueError:
        raise SettingsError(f"{name} must be a number, got {raw!r}") from None
