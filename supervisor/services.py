"""The services the lifespan starts, shared by the HTTP routes and the job runner."""

from __future__ import annotations

from dataclasses import dataclass

from supervisor.settings import Settings
from supervisor.speech.checks.asr_round_trip import AsrRoundTrip
from supervisor.speech.stores.access import LexiconAccess, VoiceAccess
from supervisor.speech.stores.lexicons import LexiconStore
from supervisor.speech.stores.result_cache import ResultCache
from supervisor.speech.stores.voices import PromptCache, Voices
from supervisor.supervision.pool import Pool
from supervisor.supervision.scheduler import Scheduler
from supervisor.tenants import Tenant


@dataclass(frozen=True)
class Services:
    """What the lifespan starts and every handler uses."""

    settings: Settings
    scheduler: Scheduler
    pool: Pool
    voices: Voices
    clones: PromptCache
    lexicons: LexiconStore
    asr: Scheduler | None = None  # the ASR sidecar's (--asr-model), None without one
    asr_pool: Pool | None = None
    results: ResultCache | None = None  # None: --cache-max-bytes 0
    hearing: AsrRoundTrip | None = None  # the ASR round trip of speech, behind its deadline

    def voices_for(self, tenant: Tenant) -> VoiceAccess:
        """The saved voices `tenant` may use (its own, the shared ones; an admin's: all)."""
        return VoiceAccess(self.voices, tenant, self.settings.tenancy.shared_voices)

    def lexicons_for(self, tenant: Tenant) -> LexiconAccess:
        """The lexicons `tenant` may use (its own; an admin's: all)."""
        return LexiconAccess(self.lexicons, tenant)
