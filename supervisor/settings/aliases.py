"""Other systems' names for our settings: omnivoice-triton-server's and OmniVoice-Studio's
(docs/MIGRATING.md).

`ALIASES` gives a setting the other flags (`--model-id`), variables (`OMNIVOICE_MODEL_ID`, each
with an optional conversion, such as Studio's 30 s floor on its recv timeout) and values (`fp16`)
it answers to. Precedence: a flag, whichever spelling (the last one given wins); then our own
variable; then the alias variables in the order declared; then the default. `IGNORED` lists flags
and variables of those systems that mean nothing here: they are accepted, and each one set adds a
line saying what we do instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class EnvAlias:
    """Another system's variable for a setting; `convert` maps its value to ours (with a note, or None)."""

    name: str
    convert: Callable[[Any], tuple[Any, str | None]] | None = None


@dataclass(frozen=True)
class Names:
    """The other names of one setting: flags, variables, and spellings of its values."""

    flags: tuple[str, ...] = ()
    env: tuple[EnvAlias, ...] = ()
    values: Mapping[str, str] = field(default_factory=dict)


def names(
    *flags: str, env: tuple[EnvAlias | str, ...] = (), values: Mapping[str, str] | None = None
) -> Names:
    return Names(
        flags, tuple(e if isinstance(e, EnvAlias) else EnvAlias(e) for e in env), dict(values or {})
    )


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

# By setting (Settings' field names); a setting not here has no other name.
ALIASES: dict[str, Names] = {
    "model": names("--model-id", env=("OMNIVOICE_MODEL_ID",)),
    "host": names(env=("OMNIVOICE_BIND_HOST",)),
    "devices": names("--device", env=("OMNIVOICE_DEVICE",), values={"cuda": "auto"}),
    "api_keys": names(env=("OMNIVOICE_API_KEY",)),
    "chunk_s": names("--audio-chunk-duration", env=("OMNIVOICE_AUDIO_CHUNK_DURATION",)),
    "request_timeout_s": names(env=("OMNIVOICE_GENERATE_TIMEOUT_S",)),
    "clone_cache_size": names(
        "--max-clone-audio-prompt-cache", env=("OMNIVOICE_MAX_CLONE_AUDIO_PROMPT_CACHE",)
    ),
    "dtype": names(values=DTYPE_NAMES),
    "load_total_s": names(
        "--infer-start-timeout-s",
        env=(
            "OMNIVOICE_INFER_START_TIMEOUT_S",
            EnvAlias("OMNIVOICE_MODEL_LOAD_TIMEOUT", _floor_30),
        ),
    ),
    "heartbeat_timeout_s": names(env=(EnvAlias("OMNIVOICE_SIDECAR_RECV_TIMEOUT_S", _floor_30),)),
    "idle_reap_s": names(env=(EnvAlias("OMNIVOICE_SIDECAR_IDLE_TIMEOUT_S", _off_at_zero),)),
    "max_batch_size": names("--batch-size", env=("OMNIVOICE_BATCH_SIZE",)),
    "max_batch_latency_ms": names(
        "--max-batch-latency", "--batch-wait-ms", env=("OMNIVOICE_BATCH_WAIT_MS",)
    ),
    "num_step": names("--default-num-step", env=("OMNIVOICE_DEFAULT_NUM_STEP",)),
}
NO_NAMES = Names()


def names_of(setting: str) -> Names:
    return ALIASES.get(setting, NO_NAMES)


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
