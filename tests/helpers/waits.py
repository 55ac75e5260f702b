"""Waiting on a condition instead of sleeping a guessed time: `wait_until` polls a predicate and
fails naming what it waited for. (In a coroutine: tests.helpers.harness.wait_for.)"""

from __future__ import annotations

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
        time.sleep(POLL_S)
