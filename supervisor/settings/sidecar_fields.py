"""The settings of the sidecars: what they run, how they are supervised and restarted, how work
is batched onto them and admitted, and the quality checks they make of the audio.

One part of `Fields` (fields.py); declare.py says how a setting is declared. The options that
reach the sidecar's command line are declared once, in sidecar/shared/options.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from sidecar.shared.options import ATTENTION, INTERACTIVE_STREAM, STEP_TOKENS, WARMUP_STEPS
from supervisor.settings.declare import setting


@dataclass(frozen=True)
class SidecarFields:
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
    warmup_steps: int = setting(WARMUP_STEPS.default, WARMUP_STEPS.help)
    interactive_step_tokens: int = setting(STEP_TOKENS.default, STEP_TOKENS.help, minimum=0)
    attention: str = setting(ATTENTION.default, ATTENTION.help, choices=ATTENTION.choices)
    interactive_stream: str = setting(
        INTERACTIVE_STREAM.default, INTERACTIVE_STREAM.help, choices=INTERACTIVE_STREAM.choices
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
    light_joins: bool = setting(
        True,
        "interactive work joins a sidecar's running batch under a light load too, not only "
        "beside bulk work (docs/ARCHITECTURE.md, Scheduling)",
    )
    # 7200 s is ~45 s of work for one GPU (docs/PERFORMANCE.md): it admits 256 mixed requests in flight
    # (~4,500 s) without refusals. 600 s (DESIGN's starting point) capped mixed batches at ~14 items.
    max_queue_audio_s: float = setting(
        7200.0,
        "admission limit per usable sidecar, in seconds of estimated audio: requests are admitted while the queue is below it, then 429",
    )
    max_queue_share_per_key: float = setting(
        0.5,
        "with API keys of several owners, the share of that limit one key's interactive "
        "requests may hold; past it they get 429 while others still have room (1: no bound)",
        above=0,
        maximum=1,
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
