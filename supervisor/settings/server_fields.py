"""The settings of the server process itself and of the requests it takes: where it listens, who
may call it, where it logs, and the bounds and defaults of a speech request.

One part of `Fields` (fields.py); declare.py says how a setting is declared.
"""

from __future__ import annotations

from dataclasses import dataclass

from supervisor.format_names import FORMATS
from supervisor.settings.declare import setting

FORMAT_NAMES = FORMATS
# An --allowed-hosts entry: *, a name or IPv4 (or *.domain), or an IPv6 in brackets; a port or not.
ALLOWED_HOST = r"\*|(\*\.)?[A-Za-z0-9_.-]+(:\d+)?|\[[0-9A-Fa-f:.]+\](:\d+)?"


@dataclass(frozen=True)
class ServerFields:
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
    trace_file: str | None = setting(
        None, "also write every request's spans to this file, one JSON line each", metavar="FILE"
    )
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
    stream_auth_s: float = setting(
        5.0,
        "a WebSocket speech session without a key has this long to send one; counted apart",
        above=0,
    )
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
    max_connections_per_peer: int = setting(
        0, "... from one address, and HTTP requests in flight per API key (0: a quarter of those)"
    )
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
