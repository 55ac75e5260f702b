"""The settings' fields: each declares its default, type, help text and bounds once.

The environment variable (OMNIVOICE_<NAME>), the `--flag`, the `--help` text and the settings
table in the docs are all derived from these declarations (flags.py, sources.py); the bounds are
checked in one loop and the rules between fields after it (rules.py); other systems' names for a
setting live in aliases.py. Nothing writes to a Settings after startup; facts learned at run time
(sample rate, devices found) live elsewhere.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from supervisor.settings import rules
from supervisor.settings.declare import redacted_url, setting
from supervisor.speech.formats import FORMATS

FORMAT_NAMES = FORMATS
# An --allowed-hosts entry: *, a name or IPv4 (or *.domain), or an IPv6 in brackets; a port or not.
ALLOWED_HOST = r"\*|(\*\.)?[A-Za-z0-9_.-]+(:\d+)?|\[[0-9A-Fa-f:.]+\](:\d+)?"


@dataclass(frozen=True)
class Fields:
    # --- server
    model: str = setting(
        "",
        "checkpoint directory or Hugging Face id (required), e.g. k2-fsa/OmniVoice",
        metavar="DIR_OR_HF_ID",
    )
    host: str = setting("127.0.0.1", "address to listen on")
    port: int = setting(9194, "port to listen on", minimum=1, maximum=65535)
    devices: str = setting(
        "auto",
        "auto (every visible GPU, else the CPU), cpu, or GPU indices such as 0,1",
        pattern=r"auto|cpu|\d+(,\d+)*",
        shape="auto, cpu or indices like 0,1",
    )
    gpu_inferer: int | None = setting(
        None,
        "run sidecars on at most this many of those GPUs, the first ones (clamped to the GPUs "
        "visible; none: all). With no GPU one CPU sidecar runs, whatever this says",
        metavar="N",
        minimum=1,
        hint="leave it out for every GPU",
    )
    api_keys: tuple[str, ...] = setting(
        (),
        "API key clients must send as a Bearer token; repeatable (env: comma-separated)",
        flag="--api-key",
        metavar="KEY",
    )
    allowed_hosts: tuple[str, ...] = setting(
        (),
        "a name the Host header may carry (any port; `name:port` for one port, `*.example.com` "
        "for its subdomains, `*` for any); repeatable (env: comma-separated). Default: the "
        "loopback names when --host is a loopback address, else any: set it on a wider address",
        metavar="HOST",
        pattern=ALLOWED_HOST,
        shape="a host name, an IP ([::1] in brackets), name:port, *.domain or *",
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
        4096,
        "longest speech 'input' (and 'instructions') accepted, in characters; longer is a 400",
        minimum=1,
    )
    max_request_audio_s: float = setting(
        600.0,
        "longest answer one speech request or job item may make, in seconds of estimated audio "
        "with every pause counted; longer is a 400 (audio_too_long)",
        above=0,
        maximum=86_400,
    )
    chunk_s: float = setting(
        15.0,
        "long input is split into chunks of about this many seconds of estimated audio (input up to twice this stays whole)",
        minimum=1,
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
    )
    strict_instructions: bool = setting(
        False,
        "answer speech 'instructions' that are not voice-design items with a 400 (default: use the "
        "items the text names, ignore the rest, and say which in the X-OmniVoice-Instructions header)",
    )
    stream_buffer_chars: int = setting(
        16384,
        "characters of text a WebSocket speech session may hold unsynthesized; input.text "
        "beyond it gets an error message and is dropped",
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
        "response_format when a request names none (OpenAI's: mp3)",
        choices=FORMAT_NAMES,
    )
    header_timeout_s: float = setting(
        30.0,
        "close a connection whose request headers are incomplete this long after it opened "
        "or last answered",
        above=0,
    )
    body_timeout_s: float = setting(
        60.0, "close a connection that sends nothing of its request body for this long", above=0
    )
    body_deadline_s: float = setting(
        60.0,
        "answer 408 and close a connection whose request body is not complete this long after "
        "its headers, however steadily it trickles",
        above=0,
    )
    max_connections: int = setting(
        0,
        "connections held at once; one more gets a 503 at once (0: from the descriptor limit, "
        "docs/DEPLOYMENT.md)",
    )
    max_connections_per_peer: int = setting(0, "... from one address (0: a quarter of those)")
    send_timeout_s: float = setting(
        60.0, "drop a client that takes none of its answer for this long", above=0
    )
    max_unsent_mb: float = setting(512.0, "MiB of answers unread by their clients; then 429s")
    max_unsent_mb_per_key: float = setting(128.0, "... and per API key")
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
    )
    warmup_steps: int = setting(
        2, "denoising steps of the warm-up generation before a sidecar reports ready (0: none)"
    )
    interactive_step_tokens: int = setting(
        4096,
        "while an interactive request runs beside a bulk batch, each denoising step holds "
        "it and bulk items up to this many tokens; the other bulk items wait (0: all wait)",
        minimum=0,
    )
    attention: str = setting(
        "fa2", "GPU attention kernel (cudnn: Hopper, the cudnn extra)", choices=("fa2", "cudnn")
    )
    compile_cache_dir: str = setting(
        "",
        "torch.compile's cache, kept across sidecar starts "
        "(default: $TORCHINDUCTOR_CACHE_DIR, else DATA_DIR/compile-cache; 'off': none)",
    )
    max_frame_mb: int = setting(64, "largest frame accepted on a sidecar pipe, in MiB", minimum=1)
    load_timeout_s: float = setting(
        120.0, "kill a loading sidecar silent for this long (each progress frame re-arms it)"
    )
    load_total_s: float = setting(
        600.0,
        "kill a sidecar not ready this long after it started",
    )
    heartbeat_timeout_s: float = setting(
        60.0,
        "kill a busy sidecar that sends no frame for this long",
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
        5, "restart intensity: at most this many unplanned restarts per device ...", minimum=1
    )
    restart_window_s: float = setting(
        600.0, "... within this window; beyond it the device is marked failed"
    )
    backoff_initial_s: float = setting(
        1.0, "delay before the second respawn in a row (the first is immediate); doubles after each"
    )
    backoff_max_s: float = setting(60.0, "longest delay between respawns")
    spare_sidecars: str = setting(
        "auto",
        "start each device's next sidecar ahead, parked before "
        "it touches the device, so a respawn skips its imports (auto: on GPUs)",
        choices=("auto", "on", "off"),
    )
    idle_reap_s: float = setting(
        0.0,
        "stop a sidecar idle this long to free its device; the next request starts it (0: never)",
    )
    min_warm: int = setting(0, "with idle reaping, keep at least this many sidecars running")
    failed_exit_s: float = setting(
        30.0, "when every device has failed, exit non-zero after this long (for systemd to restart)"
    )
    # --- scheduling
    max_batch_size: int = setting(64, "most tasks in one batch", minimum=1)
    max_batch_tokens: int = setting(
        32768, "token budget of one batch (estimated target frames plus text)", minimum=1
    )
    max_batch_latency_ms: float = setting(
        50.0,
        "a busy sidecar's next batch is sent ahead once full, or once its oldest task waited "
        "this long",
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
        above=0,
    )
    # --- jobs
    job_retention_s: float = setting(
        604800.0,
        "remove a job and its result files this long after its last item ended (0: keep forever)",
    )
    max_job_items: int = setting(10000, "most items in one job (POST /v1/jobs)", minimum=1)
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
        minimum=3,
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
        above=0,
    )
    callback_host_concurrency: int = setting(
        4,
        "most callbacks sent at once to one receiver host (all its ports); others wait for a "
        "slot, which is not an attempt",
        minimum=1,
    )
    callback_concurrency: int = setting(64, "most callbacks sent at once in all", minimum=1)
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
        rules.check_bounds(self)
        rules.check_rules(self)

    @property
    def max_frame_bytes(self) -> int:
        return self.max_frame_mb * 1024 * 1024

    def public(self) -> dict[str, Any]:
        """The settings in effect, for /health; API keys are never shown."""
        values = dataclasses.asdict(self)
        values["api_keys"] = len(self.api_keys)
        values["store"] = redacted_url(self.store)
        del values["callback_secret"]  # set whenever --callback-allow is (rules.py)
        return values
