"""The tier of a piece of work: one value from the request to the sidecar's denoising step.

A request asks for it with OpenAI's `service_tier` (`SERVICE_TIERS`); the supervisor's
scheduler serves the tiers in the order they are defined here, and a `generate` frame carries
the tier its batch runs at (`Generate.tier`), which the sidecar's stepper and finishers follow.
"""

from __future__ import annotations

import enum


class Tier(str, enum.Enum):
    """Iteration order is serving order: every interactive task goes before any bulk one."""

    INTERACTIVE = "interactive"  # wants its first audio now; joins a running bulk batch
    BULK = "bulk"  # wants throughput; waits behind interactive work (job items by default)


# OpenAI's `service_tier` values and the tier each asks for.
SERVICE_TIERS: dict[str, Tier] = {
    "auto": Tier.INTERACTIVE,
    "default": Tier.INTERACTIVE,
    "priority": Tier.INTERACTIVE,
    "flex": Tier.BULK,
}
