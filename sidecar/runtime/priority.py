"""Which members of a running batch the next denoising step runs, by their tier (torch-free:
the null engine uses it too).

While any interactive member is waiting, every interactive member runs, and bulk members,
oldest first, fill what is left of `step_tokens`; the other bulk members wait at their step.
Without interactive members, every member runs. Never more than `max_members`, nor more than
`max_tokens` once an interactive member runs (a forward pass past the largest CUDA graph would
run eagerly, slower for everyone).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

from sidecar.shared.tiers import Tier


class Member(Protocol):
    @property
    def tier(self) -> Tier: ...

    @property
    def cost(self) -> int: ...  # tokens it adds to a forward pass


M = TypeVar("M", bound=Member)


def choose(members: Sequence[M], step_tokens: int, max_members: int, max_tokens: int) -> list[M]:
    """The members the next step runs, in `members`' order (oldest first)."""
    if not any(m.tier is Tier.INTERACTIVE for m in members):
        return list(members[:max_members])
    chosen: list[M] = []
    used = 0
    for member in (m for m in members if m.tier is Tier.INTERACTIVE):
        if len(chosen) < max_members and (not chosen or used + member.cost <= max_tokens):
            chosen.append(member)
            used += member.cost
    room = min(step_tokens, max_tokens)
    for member in (m for m in members if m.tier is Tier.BULK):
        if len(chosen) < max_members and used + member.cost <= room:
            chosen.append(member)
            used += member.cost
    order = {id(m): i for i, m in enumerate(members)}
    return sorted(chosen, key=lambda m: order[id(m)])
