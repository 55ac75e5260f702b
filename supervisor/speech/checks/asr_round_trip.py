"""The ASR round trip as speech uses it (`--asr-model`): a stated deadline, and a chunk sent on
unheard, saying so, when the ASR sidecar cannot hear it.

A chunk's audio is heard back only while the ASR pool can take work (a sidecar `ready` or
`busy`, or a reaped one that a request starts). It is sent on without the ASR checks, and the
answer says `asr=skipped` (`X-OmniVoice-QA`, a job item's `qa.asr`), when:

    no ASR sidecar can take work     starting, in backoff after a crash, or failed
    the ASR pool refuses the task    draining, or failed while the task waited
    no transcript within the deadline (--asr-timeout-s): a stalled ASR sidecar (SIGSTOP, a hung
                                     device) is heard from again only at its heartbeat deadline,
                                     when the pool kills and respawns it; until then (the
                                     heartbeat timeout, counted from the missed deadline) every
                                     chunk is sent on at once rather than each waiting out the
                                     deadline in turn

So a broken ASR sidecar never holds or refuses speech; `/health` shows its state under `asr`.
An ASR model whose config.json says its weights are random (`make-checkpoint --kind whisper`)
hears noise: its checks are informational, reported but never failing a chunk.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from sidecar.shared.protocol import AsrAudio, Transcript
from sidecar.shared.tiers import Tier
from supervisor.errors import ServerError
from supervisor.pool_health import SidecarHealth
from supervisor.speech.checks.quality import as_informational
from supervisor.supervision.scheduler import Scheduler

if TYPE_CHECKING:
    from supervisor.supervision.pool import Pool

log = logging.getLogger("omnivoice.asr")

TAKES_WORK = ("ready", "busy", "reaped")


class AsrRoundTrip:
    """The ASR pool behind a deadline; `transcript` is None when the chunk goes unheard."""

    def __init__(
        self,
        scheduler: Scheduler,
        sidecars: Callable[[], Sequence[SidecarHealth]],
        deadline_s: float,
        quiet_s: float,
        clock: Callable[[], float] = time.monotonic,
        informational: bool = False,
    ) -> None:
        """`sidecars`: the ASR pool's sidecars as `/health` shows them (state, restarts);
        `quiet_s`: how long chunks go unheard after a missed deadline (the heartbeat timeout);
        `informational`: the model's weights are random, so its checks never fail a chunk."""
        self.informational = informational
        self.scheduler = scheduler
        self.sidecars = sidecars
        self.deadline_s = deadline_s
        self.quiet_s = quiet_s
        self.clock = clock
        self.quiet_until = 0.0  # after a missed deadline: every chunk unheard until then,
        self.quiet_restarts = 0  # unless the pool has restarted a sidecar since

    def restarts(self) -> int:
        return sum(s["restarts"] for s in self.sidecars())

    def can_hear(self) -> bool:
        if self.scheduler.closed is not None:
            return False
        if self.clock() < self.quiet_until and self.restarts() == self.quiet_restarts:
            return False
        return any(s["state"] in TAKES_WORK for s in self.sidecars())

    async def transcript(self, fields: AsrAudio, tier: Tier) -> Transcript | None:
        """The ASR sidecar's `transcript` of a chunk, or None: skipped (see the module); its
        checks marked informational when the model's weights are random."""
        if not self.can_hear():
            return None
        try:
            future = self.scheduler.submit_transcribe(fields, tier)
            message = await asyncio.wait_for(future, self.deadline_s)
        except asyncio.TimeoutError:
            self.quiet_until, self.quiet_restarts = self.clock() + self.quiet_s, self.restarts()
            log.warning(
                "asr: no transcript within %.0f s: chunks go out unheard (asr=skipped) for "
                "the next %.0f s, or until the ASR sidecar is replaced",
                self.deadline_s,
                self.quiet_s,
            )
            return None
        except ServerError as exc:  # the ASR pool draining, failed, or its sidecar lost
            log.info("asr: a chunk goes out unheard: %s", exc.message)
            return None
        if self.informational:  # a random-weights Whisper: its checks reported, never failing
            return {**message, "qa": as_informational(message["qa"])}
        return message


def of_pool(pool: Pool, deadline_s: float, informational: bool = False) -> AsrRoundTrip:
    """The ASR pool's AsrRoundTrip: quiet for a heartbeat timeout after a missed deadline;
    `informational`: the ASR model has random weights (`make-checkpoint --kind whisper`)."""
    return AsrRoundTrip(
        pool.scheduler,
        lambda: pool.health()["sidecars"],
        deadline_s,
        pool.settings.heartbeat_timeout_s,
        informational=informational,
    )
