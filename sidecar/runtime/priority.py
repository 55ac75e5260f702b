"""Which members of a running batch the next denoising step runs (torch-free: the null engine
uses it too).

The oldest first, as many as `max_members` and `max_tokens` allow (the first always: a member
larger than `max_tokens` runs alone). Interactive requests never share a step with bulk ones:
they run in the interactive lane (`sidecar.serve.lane`), whose stepper's `max_tokens` is its
largest CUDA graph (a pass past it would run eagerly, slower for everyone in the lane).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar


class Member(Protocol):
    @property
    def cost(self) -> int: ...  # tokens it adds to a forward pass


M = TypeVar("M", bound=Member)


def choose(members: Sequence[M], max_members: int, max_tokens: int) -> list[M]:
    """The members the next step runs, in `members`' order (oldest first)."""
    chosen: list[M] = []
    used = 0
    for member in members[:max_members]:
        if chosen and used + member.cost > max_tokens:
            break
        chosen.append(member)
        used += member.cost
    return chosen
