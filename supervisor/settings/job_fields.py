"""The settings of jobs (docs/JOBS.md): their store, retention and leases, their callbacks, and the
result cache.

One part of `Fields` (fields.py); declare.py says how a setting is declared.
"""

from __future__ import annotations

from dataclasses import dataclass

from supervisor.settings.declare import setting


@dataclass(frozen=True)
class JobFields:
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
    book_encoders: int = setting(
        0,
        "threads encoding an audiobook's parts at once (0: half the cores, at most 8)",
        minimum=0,
    )
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
