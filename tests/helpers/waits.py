"""Waiting on a condition instead of sleeping a guessed time: `wait_until` polls a predicate and
fails naming what it waited for; `async_wait_until` does the same in a coroutine, letting the
event loop run between polls."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

POLL_S = 0.02  # how often the condition is asked; the wait ends as soon as it holds


def wait_until(predicate: Callable[[], T], timeout_s: float, what: str) -> T:
    """Poll `predicate` until it returns something true, and return that; fail naming `what`
    after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = predicate()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(POLL_S)  # the poll of this wait, not a wait of its own


async def async_wait_until(predicate: Callable[[], T], timeout_s: float, what: str) -> T:
    """`wait_until` in a coroutine: the loop runs the awaited work between polls."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = predicate()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
        await asyncio.sleep(POLL_S)  # the poll of this wait, not a wait of its own
