"""What the admission queue holds: reservations made ahead of a request's tasks, and each owner's
share of the estimated audio admitted (`Scheduler.reserve`, `Scheduler.admit`).

On a server with API keys of more than one owner, one key's interactive requests may hold at most
`--max-queue-share-per-key` of the queue's limit: past it, that key is refused (429) while the
others still have room. Fair shares (`fair_share`) decide whose task goes next; this decides
whose request may wait at all, so one key cannot fill the queue and leave every other key with
429s. Bulk work (job items) is not counted here: the job runner admits it a few batches at a
time on its own. A server without keys, or whose keys are all one owner's, has one owner, who
may use the whole queue.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

from supervisor.errors import Overloaded

MAX_RETRY_AFTER_S = 600.0


class Reservation:
    """Admitted audio seconds held for tasks a request will submit later (`Scheduler.reserve`)."""

    def __init__(
        self, audio_s: float, owner: str | None, on_release: Callable[[Reservation], None]
    ) -> None:
        self.remaining_s = audio_s
        self.owner = owner  # the owner it counts against (`OwnerShares`); None: not counted
        self.on_release = on_release
        self.open = True

    def take(self, audio_s: float) -> float:
        """Move up to audio_s of the reservation onto a task; returns how much of it was covered."""
        covered = min(self.remaining_s, audio_s)
        self.remaining_s -= covered
        return covered

    def release(self) -> None:
        """Give back what no task took; the request will submit nothing more. Idempotent."""
        if self.open:
            self.open = False
            self.on_release(self)


class OwnerShares:
    """Estimated interactive audio admitted per owner, and the per-key bound on it. An owner of
    None (bulk work) is never counted nor bounded."""

    def __init__(self, share: float, keyed: bool) -> None:
        self.share = share  # of the queue's limit one owner may hold
        self.keyed = keyed  # API keys of several owners: there is someone to keep room for
        self.audio_s: defaultdict[str, float] = defaultdict(float)

    def add(self, owner: str | None, audio_s: float) -> None:
        if owner is not None:
            self.audio_s[owner] += audio_s

    def remove(self, owner: str | None, audio_s: float) -> None:
        if owner is None:
            return
        left = self.audio_s[owner] - audio_s
        if left > 1e-9:
            self.audio_s[owner] = left
        else:
            del self.audio_s[owner]

    def check(self, owner: str | None, limit_s: float, rate: float) -> None:
        """Raise Overloaded if `owner` already holds its share of a queue limited to `limit_s`
        (Retry-After: its excess at `rate`, audio seconds a second); like the queue's own check,
        a request is admitted while its owner is below the bound, whatever its own size."""
        if owner is None or not self.keyed or self.share >= 1.0:
            return
        bound = self.share * limit_s
        held = self.audio_s.get(owner, 0.0)
        if held >= bound:
            raise Overloaded(
                f"this API key's requests hold {held:.0f} s of audio to generate, its share of "
                f"the queue is {bound:.0f} s",
                retry_after_s=min(MAX_RETRY_AFTER_S, (held - bound) / rate),
            )
