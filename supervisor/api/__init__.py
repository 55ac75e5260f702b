"""HTTP route handlers, one module per group of routes, and the services they share."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request

from supervisor.lexicons import LexiconStore
from supervisor.pool import Pool
from supervisor.result_cache import ResultCache
from supervisor.scheduler import Scheduler
from supervisor.settings import Settings
from supervisor.voice_store import PromptCache, VoiceStore


@dataclass(frozen=True)
class Services:
    """What the lifespan starts and every handler uses."""

    settings: Settings
    scheduler: Scheduler
    pool: Pool
    voices: VoiceStore
    clones: PromptCache
    lexicons: LexiconStore
    asr: Scheduler | None = None  # the ASR sidecar's (--asr-model), None without one
    asr_pool: Pool | None = None
    results: ResultCache | None = None  # None: --cache-max-bytes 0


def services(request: Request) -> Services:
    svc: Services = request.app.state.services
    return svc
