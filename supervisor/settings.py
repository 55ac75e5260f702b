"""The one settings object: defaults in code, then OMNIVOICE_* variables, then command-line flags.

Each field of `Settings` declares its default, its type and its help text once. The
environment variable (OMNIVOICE_<NAME>), the `--flag`, the `--help` text and the settings table
in the docs are all derived from those declarations. Nothing writes to a Settings after startup;
facts learned at run time (sample rate, devices found) live elsewhere.

A field may also declare the other names it answers to, for users of omnivoice-triton-server
and OmniVoice-Studio (docs/MIGRATING.md): alias flags (`--model-id`), alias variables
(`OMNIVOICE_MODEL_ID`, each with an optional conversion, such as Studio's 30 s floor on its recv
timeout) and alias values (`fp16`). Precedence: a flag, whichever spelling (the last one given
wins); then our own variable; then the alias variables in the order declared; then the default.
`IGNORED` lists flags and variables of those systems that mean nothing here: they are accepted,
and each one set adds a line saying what we do instead. Every such decision (an alias that lost,
a value floored, a flag ignored) is returned as a note, which `serve` logs once logging is up.
"""

from __future__ import annotations

import argparse
import dataclasses
import ipaddress
import os
import re
import typing
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sidecar.shared.thresholds import Thresholds
from supervisor.speech.formats import FORMATS
from supervisor.tenants import KeyFile, Tenancy, parse_key_file

ENV_PREFIX = "OMNIVOICE_"
# An --allowed-hosts entry: *, a name or IPv4 (or *.domain), or an IPv6 in brackets; a port or not.
ALLOWED_HOST = r"\*|(\*\.)?[A-Za-z0-9_.-]+(:\d+)?|\[[0-9A-Fa-f:.]+\](:\d+)?"


class SettingsError(ValueError):
    """A setting with a value it cannot take; the message names the flag and the variable."""


@dataclass(frozen=True)
class EnvAlias:
    """Another system's variable for a setting; `convert` maps its value to ours (with a note, or None)."""

    name: str
    convert: Callable[[Any], tuple[Any, str | None]] | None = None


def setting(
    default: Any,
    help: str,
    *,
    flag: str | None = None,
    metavar: str | None = None,
    choices: tuple[str, ...] | None = None,
    aliases: tuple[str, ...] = (),
    env: tuple[EnvAlias | str, ...] = (),
    values: Mapping[str, str] | None = None,
) -> Any:
    env_aliases = tuple(e if isinstance(e, EnvAlias) else EnvAlias(e) for e in env)
    return field(default=default, metadata={"help": help, "flag": flag, "metavar": metavar, "choices": choices,
                                            "aliases": aliases, "env": env_aliases, "values": dict(values or {})})  # fmt: skip


def redacted_url(url: str) -> str:
    """A database URL without its password (nor any query, which may carry one)."""
    parts = urllib.parse.urlsplit(url)
    if not parts.password and not parts.query:
        return url
    netloc = (
        parts.netloc.replace(f":{parts.password}@", ":***@") if parts.password else parts.netloc
    )
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _floor_30(value: float) -> tuple[float, str | None]:
    """OmniVoice-Studio floors its sidecar recv timeout at 30 s; so do we, for its variable."""
    return (
        (30.0, "raised to its floor of 30 s (as OmniVoice-Studio does)")
        if value < 30
        else (value, None)
    )


def _off_at_zero(value: float) -> tuple[float, str | None]:
    """OmniVoice-Studio's idle timeout: 0 or less disables idle reaping."""
    return (0.0, "0 or less: idle reaping off") if value <= 0 else (value, None)


DTYPE_NAMES = {
    "fp32": "float32",
    "bf16": "bfloat16",
    "fp16": "float16",
}  # omnivoice-triton-server's spellings
FORMAT_NAMES = FORMATS


@dataclass(frozen=True)
class Settings:
    # --- server
    model: str = setting(
        "",
        "checkpoint directory or Hugging Face id (required), e.g. k2-fsa/OmniVoice",
        metavar="DIR_OR_HF_ID",
        aliases=("--model-id",),
        env=("OMNIVOICE_MODEL_ID",),
    )
    host: str = setting("127.0.0.1", "address to listen on", env=("OMNIVOICE_BIND_HOST",))
    port: int = setting(9194, "port to listen on")
    devices: str = setting(
        "auto",
        "auto (every visible GPU, else the CPU), cpu, or GPU indices such as 0,1",
        aliases=("--device",),
        env=("OMNIVOICE_DEVICE",),
        values={"cuda": "auto"},
    )
    gpu_inferer: int | None = setting(
        None,
        "run sidecars on at most this many of those GPUs, the first ones (clamped to the GPUs "
        "visible; none: all). With no GPU one CPU sidecar runs, whatever this says",
        metavar="N",
    )
    api_keys: tuple[str, ...] = setting(
        (),
        "API key clients must send as a Bearer token; repeatable (env: comma-separated)",
        flag="--api-key",
        metavar="KEY",
        env=("OMNIVOICE_API_KEY",),
    )
    allowed_hosts: tuple[str, ...] = setting(
        (),
        "a name the Host header may carry (any port; `name:port` for one port, `*.example.com` "
        "for its subdomains, `*` for any); repeatable (env: comma-separated). Default: the "
        "loopback names when --host is a loopback address, else any: set it on a wider address",
        metavar="HOST",
    )
    api_key_file: str | None = setting(
        None,
        "also read API keys from this file, one a line, with their names, admin keys, "
        "callback secrets and shared voices (docs/DEPLOYMENT.md); keeps them out of ps",
        metavar="FILE",
    )
    data_dir: str = setting(
        "", "state directory (default: $STATE_DIRECTORY, else ~/.local/state/omnivoice-supervisor)"
    )
    pid_file: str | None = setting(
        None,
        "write the server's pid to this file (default with --log-dir: the run's folder/server.pid)",
    )
    log_dir: str | None = setting(
        None,
        "also write the log to DIR/<run id>/server.log, the pid file beside it, and point "
        "DIR/latest at that folder",
        metavar="DIR",
    )
    log_run_id: str | None = setting(
        None,
        "the run's folder name under --log-dir (default: the start time, YYYYmmdd-HHMMSS)",
        metavar="ID",
    )
    log_file: str | None = setting(
        None,
        "also write the log to this file (default with --log-dir: the run's folder/server.log)",
        metavar="FILE",
    )
    log_level: str = setting("info", "log level", choices=("debug", "info", "warning", "error"))
    # --- HTTP API
    max_input_chars: int = setting(
        4096, "longest speech 'input' (and 'instructions') accepted, in characters; longer is a 400"
    )
    max_request_audio_s: float = setting(
        600.0,
        "longest answer one speech request or job item may make, in seconds of estimated audio "
        "with every pause counted; longer is a 400 (audio_too_long)",
    )
    chunk_s: float = setting(
        15.0,
        "long input is split into chunks of about this many seconds of estimated audio (input up to twice this stays whole)",
        aliases=("--audio-chunk-duration",),
        env=("OMNIVOICE_AUDIO_CHUNK_DURATION",),
    )
    normalize: bool = setting(
        False,
        "spell out numbers, dates, times, currency, units and abbreviations in the "
        "request's language before synthesis; a request's 'normalize' wins",
    )
    text_chunk_words: int = setting(
        0,
        "split long input by words instead: chunks of about this many words (a CJK or Thai "
        "character counts as one; input up to twice this stays whole). 0: by --chunk-s",
    )
    max_continuity_audio_tokens: int = setting(
        0,
        "a later chunk is prompted with at most the last this-many codec frames "
        "of the chunk before it (25 a second; 0: all of them)",
    )
    max_continuity_text_words: int = setting(
        0, "... and at most the last this-many words of its text (0: all of it)"
    )
    request_timeout_s: float = setting(
        0.0,
        "end a speech request not answered in full after this long with a 504, freeing its "
        "queue slots; a request's own request_timeout_s wins (0: no limit)",
        env=("OMNIVOICE_GENERATE_TIMEOUT_S",),
    )
    strict_instructions: bool = setting(
        False,
        "answer speech 'instructions' that are not voice-design items with a 400 (default: use the "
        "items the text names, ignore the rest, and say which in the X-OmniVoice-Instructions header)",
    )
    stream_buffer_chars: int = setting(
        16384,
        "text one WebSocket session (/v1/audio/speech/stream) may hold not yet synthesized, in "
        "characters; input.text beyond it gets an error message and is dropped",
    )
    stream_sessions: int = setting(64, "WebSocket speech sessions open at once, in all")
    stream_sessions_per_key: int = setting(8, "... and per API key")
    stream_idle_s: float = setting(
        300.0,
        "a WebSocket speech session with nothing to do and no message from its client for this "
        "long is closed",
    )
    default_response_format: str = setting(
        "mp3",
        "response_format of a request that names none (OpenAI's default is mp3)",
        choices=FORMAT_NAMES,
    )
    header_timeout_s: float = setting(
        30.0,
        "close a connection whose request headers are not complete this long after it opened "
        "(or after its previous response)",
    )
    body_timeout_s: float = setting(
        60.0, "close a connection that sends nothing of its request body for this long"
    )
    body_deadline_s: float = setting(
        60.0,
        "answer 408 and close a connection whose request body is not complete this long after "
        "its headers, however steadily it trickles",
    )
    max_upload_mb: float = setting(
        10.0,
        "largest reference audio upload (saved voices, one-shot clones), in MiB; larger is a 413",
    )
    max_reference_s: float = setting(
        30.0, "longest reference audio accepted for a voice, in seconds"
    )
    clone_cache_size: int = setting(
        32,
        "one-shot clone prompts kept in memory, by the reference's samples and transcript "
        "(least recently used first out; 0: none)",
        aliases=("--max-clone-audio-prompt-cache",),
        env=("OMNIVOICE_MAX_CLONE_AUDIO_PROMPT_CACHE",),
    )
    # --- sidecars
    engine: str = setting(
        "omnivoice",
        "what sidecars run: the model, or silence for overhead benchmarks",
        choices=("omnivoice", "null"),
    )
    dtype: str = setting(
        "auto",
        "model dtype: auto (bfloat16 on GPU, float32 on CPU), float32, bfloat16, float16",
        values=DTYPE_NAMES,
    )
    warmup_steps: int = setting(
        2, "denoising steps of the warm-up generation before a sidecar reports ready (0: none)"
    )
    max_frame_mb: int = setting(64, "largest frame accepted on a sidecar pipe, in MiB")
    load_timeout_s: float = setting(
        120.0, "kill a loading sidecar silent for this long (each progress frame re-arms it)"
    )
    load_total_s: float = setting(
        600.0,
        "kill a sidecar not ready this long after it started",
        aliases=("--infer-start-timeout-s",),
        env=(
            "OMNIVOICE_INFER_START_TIMEOUT_S",
            EnvAlias("OMNIVOICE_MODEL_LOAD_TIMEOUT", _floor_30),
        ),
    )
    heartbeat_timeout_s: float = setting(
        60.0,
        "kill a busy sidecar that sends no frame for this long",
        env=(EnvAlias("OMNIVOICE_SIDECAR_RECV_TIMEOUT_S", _floor_30),),
    )
    ping_interval_s: float = setting(30.0, "ping an idle sidecar after this long without a frame")
    ping_timeout_s: float = setting(
        10.0, "kill an idle sidecar that does not answer a ping within this long"
    )
    stop_timeout_s: float = setting(
        10.0, "after asking a sidecar to shut down, SIGKILL it after this long"
    )
    memory_reclaim_s: float = setting(
        60.0,
        "after a kill, wait this long for the GPU's memory to come back, else mark the GPU failed",
    )
    memory_slack_mb: int = setting(
        512, "GPU memory above the pre-start level that still counts as 'back'"
    )
    max_restarts: int = setting(
        5, "restart intensity: at most this many unplanned restarts per device ..."
    )
    restart_window_s: float = setting(
        600.0, "... within this window; beyond it the device is marked failed"
    )
    backoff_initial_s: float = setting(
        1.0, "delay before the second respawn in a row (the first is immediate); doubles after each"
    )
    backoff_max_s: float = setting(60.0, "longest delay between respawns")
    idle_reap_s: float = setting(
        0.0,
        "stop a sidecar idle this long to free its device; the next request starts it (0: never)",
        env=(EnvAlias("OMNIVOICE_SIDECAR_IDLE_TIMEOUT_S", _off_at_zero),),
    )
    min_warm: int = setting(0, "with idle reaping, keep at least this many sidecars running")
    failed_exit_s: float = setting(
        30.0, "when every device has failed, exit non-zero after this long (for systemd to restart)"
    )
    # --- scheduling
    max_batch_size: int = setting(
        64, "most tasks in one batch", aliases=("--batch-size",), env=("OMNIVOICE_BATCH_SIZE",)
    )
    max_batch_tokens: int = setting(
        32768, "token budget of one batch (estimated target frames plus text)"
    )
    max_batch_latency_ms: float = setting(
        50.0,
        "a busy sidecar's next batch is sent ahead once full, or once its oldest task waited "
        "this long",
        aliases=("--max-batch-latency", "--batch-wait-ms"),
        env=("OMNIVOICE_BATCH_WAIT_MS",),
    )
    # 7200 s is ~45 s of work for one GPU (docs/PERFORMANCE.md): it admits 256 mixed requests in flight
    # (~4,500 s) without refusals. 600 s (DESIGN's starting point) capped mixed batches at ~14 items.
    max_queue_audio_s: float = setting(
        7200.0,
        "admission limit per usable sidecar, in seconds of estimated audio: requests are admitted while the queue is below it, then 429",
    )
    drain_s: float = setting(
        60.0, "on SIGTERM, let work in flight finish for this long before stopping"
    )
    systemd_ready: str = setting(
        "first",
        "under systemd, say READY=1 once the first sidecar is ready, or once all are",
        choices=("first", "all"),
    )
    num_step: int = setting(
        32,
        "default denoising steps per request",
        aliases=("--default-num-step",),
        env=("OMNIVOICE_DEFAULT_NUM_STEP",),
    )
    # --- quality checks (sidecar/audio/checks.py; docs/RELIABILITY.md says what each one catches)
    qa_retries: int = setting(
        2,
        "regenerate a chunk failing a check (another seed), at most N times",
    )
    qa_thresholds: str = setting(
        "",
        "check thresholds other than the defaults (docs/RELIABILITY.md)",
        metavar="NAME=VALUE,...",
    )
    asr_model: str = setting(
        "",
        "Whisper model that hears chunks and references (none: no ASR)",
        metavar="DIR_OR_HF_ID",
    )
    asr_timeout_s: float = setting(
        20.0,
        "longest wait for a chunk's transcript; past it the chunk goes out unheard "
        "(X-OmniVoice-QA: ...; asr=skipped), and so do all for a heartbeat timeout",
    )
    # --- jobs
    job_retention_s: float = setting(
        604800.0,
        "remove a job and its result files this long after its last item ended (0: keep forever)",
    )
    max_job_items: int = setting(10000, "most items in one job (POST /v1/jobs)")
    store: str = setting(
        "sqlite",
        "where jobs and saved voices live: sqlite (the data directory, one server) or a "
        "postgresql://USER:PASSWORD@HOST/DB URL that many servers share (docs/DEPLOYMENT.md)",
        metavar="URL",
    )
    lease_s: float = setting(
        30.0,
        "with PostgreSQL: how long a server's claim on a job item lasts unrenewed; a dead "
        "server's items run elsewhere this long after it stopped renewing",
    )
    callback_allow: tuple[str, ...] = setting(
        (),
        "where a job's callback_url may point: HOST (a name or IP; its scheme's default port "
        "only, 80 or 443), HOST:PORT (that port) or HOST:* (any port); repeatable (env: "
        "comma-separated). None: jobs may not name a callback",
        metavar="HOST[:PORT]",
    )
    callback_secret: str = setting(
        "",
        "key of the callbacks' HMAC-SHA256 signature (X-OmniVoice-Signature); "
        "required with --callback-allow",
        metavar="SECRET",
    )
    callback_attempts: int = setting(
        8, "a job's callback is sent at most this many times until one answers 2xx"
    )
    callback_backoff_s: float = setting(
        2.0, "wait before a callback's second attempt; doubles after each, to at most 10 minutes"
    )
    callback_timeout_s: float = setting(
        10.0,
        "deadline of one callback attempt, the whole exchange: connecting, sending, the answer's "
        "status and headers (its body is never read)",
    )
    callback_host_concurrency: int = setting(
        4,
        "most callbacks sent at once to one receiver host (all its ports); others wait for a "
        "slot, which is not an attempt",
    )
    callback_concurrency: int = setting(64, "most callbacks sent at once in all")
    cache_dir: str = setting(
        "",
        "result cache of reproducible answers (a seed given; every job item) "
        "(default: DATA_DIR/cache)",
        metavar="DIR",
    )
    cache_max_bytes: int = setting(
        2 * 2**30,
        "most bytes the result cache keeps on disk, least recently used out first (0: no cache)",
        metavar="BYTES",
    )
    cache_shared: bool = setting(
        False,
        "one result cache for every API key (default: each key's owner has its own, so a key "
        "never learns from a hit what another key synthesised)",
    )
    test_faults: bool = setting(
        False,
        "TEST ONLY: sidecars honour fault markers (sidecar/devtools/faults.py) and SIGUSR2 wedges the event loop; never in "
        "production, and refused unless --host is a loopback address",
    )
    test_fault_dir: str = setting(
        "",
        "TEST ONLY: a fault marker's @PATH token must lie in this directory, else it never fires and nothing "
        "is deleted (default: DATA_DIR/test-faults)",
        metavar="DIR",
    )

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
                raise SettingsError(f"{flag_of(f)} ({env_of(f)}) must not be negative, got {value}")
            choices = f.metadata.get("choices")
            if choices and value not in choices:
                raise SettingsError(
                    f"{flag_of(f)} ({env_of(f)}) must be one of {', '.join(choices)}, got {value!r}"
                )
        if not 0 < self.port < 65536:
            raise SettingsError(f"--port must be between 1 and 65535, got {self.port}")
        if not re.fullmatch(r"auto|cpu|\d+(,\d+)*", self.devices):
            raise SettingsError(
                f"--devices must be auto, cpu or indices like 0,1; got {self.devices!r}"
            )
        for name in (
            "max_batch_size",
            "max_batch_tokens",
            "max_frame_mb",
            "max_restarts",
            "max_input_chars",
            "max_job_items",
            "callback_host_concurrency",
            "callback_concurrency",
        ):
            if getattr(self, name) < 1:
                raise SettingsError(f"--{name.replace('_', '-')} must be at least 1")
        if not 0 < self.max_request_audio_s <= 86_400:
            raise SettingsError("--max-request-audio-s must be more than 0 and at most 86400")
        if min(self.header_timeout_s, self.body_timeout_s, self.body_deadline_s) <= 0:
            raise SettingsError(
                "--header-timeout-s, --body-timeout-s and --body-deadline-s must be greater than 0"
            )
        try:
            Thresholds.from_spec(self.qa_thresholds)
        except ValueError as exc:
            raise SettingsError(f"--qa-thresholds (OMNIVOICE_QA_THRESHOLDS): {exc}") from None
        if self.chunk_s < 1:
            raise SettingsError("--chunk-s must be at least 1 second")
        if self.gpu_inferer is not None and self.gpu_inferer < 1:
            raise SettingsError(
                "--gpu-inferer (OMNIVOICE_GPU_INFERER) must be at least 1; leave it out for every GPU"
            )
        if self.log_run_id is not None and not self.log_dir:
            raise SettingsError(
                "--log-run-id names a folder under --log-dir: set --log-dir (OMNIVOICE_LOG_DIR) too"
            )
        if self.log_run_id is not None and (
            not self.log_run_id
            or self.log_run_id in (".", "..", "latest")
            or "/" in self.log_run_id
        ):
            raise SettingsError(
                f"--log-run-id must be a plain folder name (not 'latest'), got {self.log_run_id!r}"
            )
        key_file = read_key_file(self.api_key_file) if self.api_key_file else KeyFile()
        object.__setattr__(self, "api_keys", tuple(dict.fromkeys(self.api_keys + key_file.keys)))
        # Not a setting of its own: what the keys may do, for the routes, the runner and callbacks
        object.__setattr__(self, "_tenancy", Tenancy.of(self.api_keys, key_file))
        if any(not key.strip() for key in self.api_keys):
            # An empty key would let `Authorization: Bearer ` in.
            raise SettingsError(
                "an API key (--api-key, OMNIVOICE_API_KEYS, --api-key-file) "
                "must not be empty or blank (a comma-separated list has no empty parts; "
                "unset the variable to run without keys)"
            )
        for host in self.allowed_hosts:
            if not re.fullmatch(ALLOWED_HOST, host):
                raise SettingsError(
                    f"--allowed-hosts (OMNIVOICE_ALLOWED_HOSTS): {host!r} is not a host name, "
                    "an IP ([::1] in brackets), name:port, *.domain or *"
                )
        if self.test_faults and not is_loopback(self.host):
            raise SettingsError(
                "--test-faults lets clients crash sidecars: it is refused unless "
                f"--host is a loopback address (127.0.0.1, ::1, localhost), got {self.host!r}"
            )
        if self.store != "sqlite" and not self.store.startswith(("postgresql://", "postgres://")):
            raise SettingsError(
                f"--store (OMNIVOICE_STORE) must be sqlite or a postgresql:// URL, got "
                f"{self.store.split('://')[0]!r}"
            )
        if self.lease_s < 3:
            raise SettingsError(
                f"--lease-s (OMNIVOICE_LEASE_S) must be at least 3, got {self.lease_s}"
            )
        if self.callback_allow and not self.callback_secret:
            raise SettingsError(
                "--callback-allow needs --callback-secret (OMNIVOICE_CALLBACK_SECRET): "
                "callbacks are always signed"
            )
        if self.callback_timeout_s <= 0:
            raise SettingsError("--callback-timeout-s must be greater than 0")
        self.check_callback_allow()
        if self.asr_timeout_s <= 0:
            raise SettingsError("--asr-timeout-s must be greater than 0")
        if self.engine == "omnivoice" and not self.model:
            raise SettingsError(
                "--model (OMNIVOICE_MODEL) is required: a checkpoint directory "
                "(--model /path/to/checkpoint) or a Hugging Face id (--model k2-fsa/OmniVoice)"
            )

    def check_callback_allow(self) -> None:
        if not self.callback_allow:
            return
        from supervisor.jobs.callbacks import allowed_entry  # httpx: only when there is a list

        for entry in self.callback_allow:
            try:
                allowed_entry(entry)
            except ValueError as exc:
                raise SettingsError(f"--callback-allow (OMNIVOICE_CALLBACK_ALLOW): {exc}") from None

    @property
    def tenancy(self) -> Tenancy:
        """Every key's tenant, and the shared voices (supervisor.tenants)."""
        found: Tenancy = self.__dict__["_tenancy"]
        return found

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

    def resolved_cache_dir(self) -> str:
        return self.cache_dir or os.path.join(self.resolved_data_dir(), "cache")

    def resolved_test_fault_dir(self) -> str:
        return self.test_fault_dir or os.path.join(self.resolved_data_dir(), "test-faults")

    def public(self) -> dict[str, Any]:
        """The settings in effect, for /health; API keys are never shown."""
        values = dataclasses.asdict(self)
        values["api_keys"] = len(self.api_keys)
        values["store"] = redacted_url(self.store)
        del values["callback_secret"]  # set whenever --callback-allow is (checked above)
        return values

    # ------------------------------------------------------------ sources

    @classmethod
    def from_sources(cls, flags: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None,
                     notes: list[str] | None = None) -> Settings:  # fmt: skip
        """Defaults, overridden by variables (ours, then the aliases), overridden by flags (attribute names).

        `notes` gets one line per decision worth logging: which of two variables won, a value
        converted, an ignored flag or variable of another system."""
        environ = os.environ if environ is None else environ
        notes = [] if notes is None else notes
        hints = typing.get_type_hints(cls)
        fields = {f.name: f for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {}
        given_env: dict[str, list[str]] = {}
        for f in dataclasses.fields(cls):
            found: list[tuple[str, Any]] = []
            converted: str | None = None
            for name, convert in (
                (env_of(f), None),
                *((a.name, a.convert) for a in f.metadata["env"]),
            ):
                raw = environ.get(name)
                if raw is None:
                    continue
                value = _parse_env(f, hints[f.name], raw, name)
                if convert is not None:
                    value, why = convert(value)
                    if why and not found:  # said only of the variable that wins
                        converted = f"{name}={raw}: {why}, so {flag_of(f)} is {value:g}"
                found.append((name, value))
            if converted:
                notes.append(converted)
            if found:
                values[f.name] = found[0][1]
                given_env[f.name] = [name for name, _ in found]
                if len(found) > 1:
                    losers = ", ".join(f"{name}={environ[name]}" for name, _ in found[1:])
                    notes.append(f"{found[0][0]}={environ[found[0][0]]} and {losers} are {'both' if len(found) == 2 else 'all'} set: {found[0][0]} wins "
                                 "(our own name first, then the others in the order docs/MIGRATING.md lists)")  # fmt: skip
        for name, value in (flags or {}).items():
            value = tuple(value) if isinstance(value, list) else value
            if name in given_env and values[name] != value:
                shown = ",".join(value) if isinstance(value, tuple) else value
                notes.append(
                    f"{' and '.join(given_env[name])} overridden by the command line ({flag_of(fields[name])} {shown})"
                )
            values[name] = value
        for entry in IGNORED:
            if entry.env and environ.get(entry.env) is not None:
                notes.append(entry.note(f"{entry.env}={environ[entry.env]}"))
        return cls(**values)

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """One flag per field, in the groups of HELP_GROUPS; the other products' spellings (aliases,
        ignored flags) are accepted but named once, in one short section at the end.
        Flags left out fall through to the environment and the default."""
        hints = typing.get_type_hints(cls)
        group: Any = parser
        compat: list[str] = []
        for f in dataclasses.fields(cls):
            if f.name in HELP_GROUPS:
                group = parser.add_argument_group(HELP_GROUPS[f.name])
            kind = hints[f.name]
            shown = f"[env {env_of(f)}{_shown_default(f.default)}]"
            help_text = f"{f.metadata['help']} {shown}".replace("%", "%%")
            options: dict[str, Any] = {"dest": f.name, "default": argparse.SUPPRESS}
            if kind is not bool and not f.metadata.get("choices"):
                options["metavar"] = f.metadata.get("metavar") or _metavar(f.name, kind)
            if kind is bool:
                options["action"] = argparse.BooleanOptionalAction
            elif kind == tuple[str, ...]:
                options["action"] = "append"
            else:
                options["action"] = _Store
                options["type"] = _value_type(_scalar_type(kind), f.metadata["values"])
                options["choices"] = f.metadata.get("choices")
            group.add_argument(flag_of(f), help=help_text, **options)
            for alias in f.metadata["aliases"]:
                parser.add_argument(alias, help=argparse.SUPPRESS, **options)
            spellings = [*f.metadata["aliases"], *(a.name for a in f.metadata["env"])]
            if spellings:
                compat.append(f"{', '.join(spellings)} = {flag_of(f)}")
        ignored = [e for e in IGNORED if e.flags]
        compat.append(
            "accepted with no effect (each one given is logged with what this server "
            "does instead): " + ", ".join("/".join(e.flags) for e in ignored)
        )
        title = "flags and variables of omnivoice-triton-server and OmniVoice-Studio (docs/MIGRATING.md)"
        parser.add_argument_group(title, "; ".join(compat).replace("%", "%%") + ".")
        for entry in ignored:
            options = {"dest": entry.dest, "default": argparse.SUPPRESS, "help": argparse.SUPPRESS}
            if entry.kind is bool:
                options["action"] = argparse.BooleanOptionalAction
            else:
                options["type"] = entry.kind
            parser.add_argument(*entry.flags, **options)

    @classmethod
    def from_namespace(cls, namespace: argparse.Namespace, environ: Mapping[str, str] | None = None,
                       notes: list[str] | None = None) -> Settings:  # fmt: skip
        notes = [] if notes is None else notes
        fields = {f.name: f for f in dataclasses.fields(cls)}
        given = vars(namespace)
        for dest, spellings in given.get(_Store.SPELLINGS, {}).items():
            if len(set(spellings)) > 1:
                notes.append(
                    f"{' and '.join(dict.fromkeys(spellings))} both given: the last one ({spellings[-1]} {given[dest]}) wins"
                )
        for entry in IGNORED:
            if entry.dest in given:
                notes.append(entry.note(f"{entry.flags[0]} {given[entry.dest]}"))
        return cls.from_sources({k: v for k, v in given.items() if k in fields}, environ, notes)

    @classmethod
    def table(cls) -> list[tuple[str, str, str, str]]:
        """(flag, variable, default, help) per field, for the docs."""
        return [
            (flag_of(f), env_of(f), repr(f.default), f.metadata["help"])
            for f in dataclasses.fields(cls)
        ]


# serve --help: the group each field starts (fields follow in declaration order).
HELP_GROUPS = {
    "model": "common settings",
    "pid_file": "logs and the pid file",
    "max_input_chars": "requests",
    "engine": "sidecars and their supervision",
    "max_batch_size": "batching and admission",
    "qa_retries": "quality checks",
    "job_retention_s": "jobs",
}


def _metavar(name: str, kind: Any) -> str:
    """A short placeholder by unit or kind: --drain-s SECONDS, --max-upload-mb MB, --data-dir DIR."""
    units = (("_ms", "MS"), ("_s", "SECONDS"), ("_mb", "MB"), ("_dir", "DIR"), ("_file", "FILE"))
    for suffix, metavar in units:
        if name.endswith(suffix):
            return metavar
    return "N" if _scalar_type(kind) in (int, float) else name.upper()


def _shown_default(default: Any) -> str:
    """'; default: X' for --help, or nothing where the default is 'not set'."""
    if default is None or default == "" or default == ():
        return ""
    return f"; default: {default}"


def read_key_file(path: str) -> KeyFile:
    """The key file's keys, their names and options, and the shared voices (supervisor.tenants)."""
    try:
        text = Path(path).expanduser().read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(
            f"--api-key-file (OMNIVOICE_API_KEY_FILE) cannot be read: {exc}"
        ) from None
    try:
        return parse_key_file(text)
    except ValueError as exc:
        raise SettingsError(f"--api-key-file (OMNIVOICE_API_KEY_FILE) {path}: {exc}") from None


def is_loopback(host: str) -> bool:
    """Whether an address to listen on is reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def flag_of(f: dataclasses.Field) -> str:  # type: ignore[type-arg]
    return f.metadata.get("flag") or "--" + f.name.replace("_", "-")


def env_of(f: dataclasses.Field) -> str:  # type: ignore[type-arg]
    return ENV_PREFIX + f.name.upper()


def _scalar_type(kind: Any) -> Any:
    if kind in (int, float, str):
        return kind
    args = [a for a in typing.get_args(kind) if a is not type(None)]
    return args[0] if args else str


class _Store(argparse.Action):
    """argparse's store, noting which spelling of a flag was used (a flag and its alias both given is a note)."""

    SPELLINGS = "_spellings"

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, values)
        spellings: dict[str, list[str]] = namespace.__dict__.setdefault(self.SPELLINGS, {})
        spellings.setdefault(self.dest, []).append(option_string or self.dest)


def _value_type(scalar: Any, aliases: Mapping[str, str]) -> Any:
    """The flag's converter, taking another system's spelling of a value (fp16) as ours (float16)."""
    if not aliases:
        return scalar

    def convert(raw: str) -> Any:
        return scalar(aliases.get(raw, raw))

    convert.__name__ = getattr(scalar, "__name__", "value")
    return convert


@dataclass(frozen=True)
class Ignored:
    """A flag (and variable) of another system that means nothing here: accepted, and logged."""

    flags: tuple[str, ...]
    instead: str  # what this server does instead, one line
    kind: Any = str
    env: str | None = None

    @property
    def dest(self) -> str:
        return "ignored_" + (
            self.flags[0].lstrip("-").replace("-", "_") if self.flags else str(self.env).lower()
        )

    def note(self, given: str) -> str:
        return f"{given}: no effect here; {self.instead}"


_SAMPLING = "the runtime samples as the reference does (guidance_scale 2, t_shift 0.1, position temperature 5, class temperature 0, layer penalty 5)"
_CHUNKER = "our chunker balances chunks and cuts at the strongest break near each share (--chunk-s or --text-chunk-words)"
_GRAPHS = "the runtime captures CUDA graphs for its own fixed shape buckets at start"
_PIPES = "sidecars talk to the supervisor over pipes, not TCP"
_METRICS = "/metrics is Prometheus text from the supervisor's own memory"
IGNORED: tuple[Ignored, ...] = (
    Ignored(
        ("--fastapi-workers", "--workers"),
        "one process serves HTTP and batches for every GPU (PERFORMANCE.md: 1683 requests/s on 2 cores)",
        int,
        "OMNIVOICE_WORKERS",
    ),
    Ignored(
        ("--cuda-stream-count", "--cuda-streams"),
        "each sidecar runs one batch at a time, the next one waiting in its pipe",
        int,
        "OMNIVOICE_CUDA_STREAMS",
    ),
    Ignored(
        ("--runner-mode",),
        "the runtime is our own: CUDA graphs over fixed shape buckets in half precision, chosen by itself",
        str,
        "OMNIVOICE_RUNNER_MODE",
    ),
    Ignored(
        ("--attn-backend",),
        "the runtime chooses its own attention kernels",
        str,
        "OMNIVOICE_ATTN_BACKEND",
    ),
    Ignored(("--cuda-graph-min-width",), _GRAPHS, int, "OMNIVOICE_CUDA_GRAPH_MIN_WIDTH"),
    Ignored(("--cuda-graph-max-width",), _GRAPHS, int, "OMNIVOICE_CUDA_GRAPH_MAX_WIDTH"),
    Ignored(
        ("--cuda-graph-auto-width-tokens-per-word",),
        _GRAPHS,
        int,
        "OMNIVOICE_CUDA_GRAPH_AUTO_WIDTH_TOKENS_PER_WORD",
    ),
    Ignored(("--cuda-graph-auto-max-width",), _GRAPHS, int, "OMNIVOICE_CUDA_GRAPH_AUTO_MAX_WIDTH"),
    Ignored(("--infer-host",), _PIPES, str, "OMNIVOICE_INFER_HOST"),
    Ignored(("--infer-port",), _PIPES, int, "OMNIVOICE_INFER_PORT"),
    Ignored(("--metrics-shm-path",), _METRICS, str, "OMNIVOICE_METRICS_SHM_PATH"),
    Ignored(("--metrics-shm-size",), _METRICS, int, "OMNIVOICE_METRICS_SHM_SIZE"),
    Ignored(
        ("--metrics-snapshot-interval-s",),
        "/metrics is read at scrape time",
        float,
        "OMNIVOICE_METRICS_SNAPSHOT_INTERVAL_S",
    ),
    Ignored(
        ("--log-retention-days",),
        "run folders under --log-dir are kept; remove old ones with tmpfiles.d or find -mtime",
        int,
        "OMNIVOICE_LOG_RETENTION_DAYS",
    ),
    Ignored(("--sample-rate",), "audio is always the model's 24 kHz", int, "OMNIVOICE_SAMPLE_RATE"),
    Ignored(
        ("--max-sse-audio-b64-chars",),
        "each SSE delta carries at most 48000 bytes of audio",
        int,
        "OMNIVOICE_MAX_SSE_AUDIO_B64_CHARS",
    ),
    Ignored(
        ("--guidance-scale",),
        _SAMPLING + "; send guidance_scale per request",
        float,
        "OMNIVOICE_GUIDANCE_SCALE",
    ),
    Ignored(("--t-shift",), _SAMPLING, float, "OMNIVOICE_T_SHIFT"),
    Ignored(("--position-temperature",), _SAMPLING, float, "OMNIVOICE_POSITION_TEMPERATURE"),
    Ignored(("--class-temperature",), _SAMPLING, float, "OMNIVOICE_CLASS_TEMPERATURE"),
    Ignored(("--layer-penalty-factor",), _SAMPLING, float, "OMNIVOICE_LAYER_PENALTY_FACTOR"),
    Ignored(("--denoise",), "denoise is per request (default true)", bool, "OMNIVOICE_DENOISE"),
    Ignored(
        ("--postprocess-output",),
        "output is always post-processed as the reference does (silence trim, fades, peak level)",
        bool,
        "OMNIVOICE_POSTPROCESS_OUTPUT",
    ),
    Ignored(
        ("--audio-chunk-threshold",),
        "input estimated at up to twice --chunk-s (--audio-chunk-duration) stays whole",
        float,
        "OMNIVOICE_AUDIO_CHUNK_THRESHOLD",
    ),
    Ignored(
        ("--text-chunk-soft-overflow-ratio",),
        _CHUNKER,
        float,
        "OMNIVOICE_TEXT_CHUNK_SOFT_OVERFLOW_RATIO",
    ),
    Ignored(
        ("--text-chunk-same-sentence-penalty",),
        _CHUNKER,
        int,
        "OMNIVOICE_TEXT_CHUNK_SAME_SENTENCE_PENALTY",
    ),
    Ignored(
        ("--text-chunk-sentence-boundary-penalty",),
        _CHUNKER,
        int,
        "OMNIVOICE_TEXT_CHUNK_SENTENCE_BOUNDARY_PENALTY",
    ),
    Ignored(
        ("--text-chunk-fragment-boundary-penalty",),
        _CHUNKER,
        int,
        "OMNIVOICE_TEXT_CHUNK_FRAGMENT_BOUNDARY_PENALTY",
    ),
    Ignored(
        ("--text-chunk-short-underfill-ratio",),
        _CHUNKER,
        float,
        "OMNIVOICE_TEXT_CHUNK_SHORT_UNDERFILL_RATIO",
    ),
    Ignored(
        ("--text-chunk-short-underfill-penalty",),
        _CHUNKER,
        int,
        "OMNIVOICE_TEXT_CHUNK_SHORT_UNDERFILL_PENALTY",
    ),
    Ignored(
        ("--default-voice-instructions",),
        "voice 'auto' lets the model choose a voice; send instructions or an OpenAI voice name",
        str,
        "OMNIVOICE_DEFAULT_VOICE_INSTRUCTIONS",
    ),
    Ignored(
        (),
        "the model always runs in a crash-isolated sidecar (OmniVoice-Studio's omnivoice-subprocess)",
        str,
        "OMNIVOICE_TTS_BACKEND",
    ),
)


# Settings whose variable keeps its blank parts, so that the checks refuse them.
BLANKS_REFUSED = frozenset({"api_keys"})


def _parse_env(f: dataclasses.Field, kind: Any, raw: str, name: str | None = None) -> Any:  # type: ignore[type-arg]
    name = name or env_of(f)
    raw = f.metadata.get("values", {}).get(raw, raw)
    if kind is bool:
        lowered = raw.strip().lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off", ""):
            return False
        raise SettingsError(f"{name} must be true or false, got {raw!r}")
    if kind == tuple[str, ...]:
        parts = tuple(part.strip() for part in raw.split(","))
        if f.name in BLANKS_REFUSED:  # ", ," must not read as "no key at all": an open server
            return parts
        return tuple(part for part in parts if part)
    scalar = _scalar_type(kind)
    if scalar is str:
        return raw if raw or kind is str else None
    if not raw.strip() and type(None) in typing.get_args(kind):
        return None  # an optional number left empty: not set
    try:
        return scalar(raw)
    except ValueError:
        raise SettingsError(f"{name} must be a number, got {raw!r}") from None
