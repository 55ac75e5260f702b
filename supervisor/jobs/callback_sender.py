"""Sending job callbacks (supervisor/jobs/callbacks.py checks the addresses and signs).

Driven by the job runner's pass: once a job has ended (completed,
failed, or cancelled, with no item still running) its summary, the job object without items, is
POSTed (supervisor/jobs/callback_exchange.py bounds the exchange and the slots it waits for).
A 2xx answer delivers it, and it is never sent again; anything else (another status, a refused
connection, the deadline passing, a URL the allow-list no longer admits, any error at all) is
recorded on the job and tried again after a backoff that doubles from --callback-backoff-s up
to MAX_BACKOFF_S, at most --callback-attempts times, then the callback ends `failed`. Each
attempt is recorded in the job store before the next one, so a restart carries on where it
was; only a crash between a receiver's 2xx and that record sends it once more. Redirects are
not followed: they could lead off the allow-list.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
from collections.abc import Callable

from supervisor.errors import InvalidRequest
from supervisor.jobs import callback_exchange
from supervisor.jobs.callbacks import (
    SIGNATURE_HEADER,
    check_url,
    receiver_host,
    signature,
)
from supervisor.jobs.storage import CallbackDue, JobStorage
from supervisor.jobs.views import JobView
from supervisor.settings import JobSettings
from supervisor.tenants import Tenancy

log = logging.getLogger("omnivoice.callbacks")

MAX_BACKOFF_S = 600.0
HOLD_S = 60.0  # a callback whose attempt could not be recorded (a full disk) waits this long
ERROR_CHARS = 300  # of a failed attempt's reason, kept on the job


def backoff_s(first_s: float, attempts: int) -> float:
    """The wait after the `attempts`-th failed attempt (1-based)."""
    return float(min(MAX_BACKOFF_S, first_s * 2 ** (attempts - 1)))


class CallbackSender:
    """Sends the callbacks of ended jobs, one task per job, each attempt recorded in the store."""

    def __init__(
        self,
        settings: JobSettings,
        tenancy: Tenancy,
        store: JobStorage,
        summary: Callable[[JobView], JobView],
    ) -> None:
        """`summary` turns the store's job object into the body (the runner adds its outlook)."""
        self.settings = settings
        self.tenancy = tenancy  # whose secret signs a job's callback
        self.store = store
        self.summary = summary
        self.sending: dict[str, asyncio.Task[None]] = {}
        self.held: dict[str, float] = {}  # job id -> time.monotonic() it may be sent again
        self.client = callback_exchange.client(settings.callback_timeout_s)
        self.slots = callback_exchange.Slots(
            settings.callback_host_concurrency, settings.callback_concurrency
        )

    async def dispatch(self) -> None:
        """Start sending each callback that is due, not being sent, and has a free slot; give the
        others back to the store (with PostgreSQL another server may take them)."""
        now = time.monotonic()
        self.held = {job_id: until for job_id, until in self.held.items() if until > now}
        waiting: list[str] = []
        for due in await asyncio.to_thread(self.store.callbacks_due, time.time()):
            if due.job_id in self.sending or due.job_id in self.held:
                continue
            host = receiver_host(due.url)
            if not self.slots.take(host):
                waiting.append(due.job_id)
                continue
            task = asyncio.create_task(self.attempt(due), name=f"callback-{due.job_id}")
            self.sending[due.job_id] = task
            task.add_done_callback(functools.partial(self.forget, due.job_id, host))
        if waiting:
            await asyncio.to_thread(self.store.callbacks_release, waiting, time.time())

    def forget(self, job_id: str, host: str, _task: asyncio.Task[None]) -> None:
        self.sending.pop(job_id, None)
        self.slots.give_back(host)

    async def attempt(self, due: CallbackDue) -> None:
        """One attempt; if it cannot be made or recorded, the callback is held back for a while
        (not sent again every pass)."""
        try:
            await self.send(due)
        except asyncio.CancelledError:
            raise
        except Exception:  # the store refusing writes (a full disk), or a bug
            log.exception(
                "jobs: the callback of %s could not be sent or recorded; trying again in %.0f s",
                due.job_id,
                HOLD_S,
            )
            self.held[due.job_id] = time.monotonic() + HOLD_S

    async def send(self, due: CallbackDue) -> None:
        job = await asyncio.to_thread(self.store.job, due.job_id, False)
        if job is None:  # removed meanwhile
            return
        status, error = await self.exchange(due, job)
        await self.record(due, status, error)

    async def exchange(self, due: CallbackDue, job: JobView) -> tuple[int | None, str | None]:
        """One attempt: the answer's status (None without one) and what went wrong (None: it
        was delivered). Every failure is an error here, whatever its type: one that comes back
        at each attempt (a URL the sender refuses, a summary that cannot be made) ends `failed`
        after the last, not held back again and again."""
        deadline_s = self.settings.callback_timeout_s
        try:
            check_url(due.url, self.settings.callback_allow)  # the allow-list of this run
            body, headers = self.signed(job, due.secret or self.secret(due.owner))
            status = await callback_exchange.post(self.client, due.url, body, headers, deadline_s)
        except InvalidRequest as exc:
            return None, exc.message[:ERROR_CHARS]
        except asyncio.TimeoutError:
            return None, f"no answer within --callback-timeout-s ({deadline_s:g} s)"
        except Exception as exc:  # any failure of the exchange is a failed attempt
            return None, (f"{type(exc).__name__}: {exc}".rstrip(": "))[:ERROR_CHARS]
        return status, None if 200 <= status < 300 else f"HTTP {status}"

    def signed(self, job: JobView, secret: str) -> tuple[bytes, dict[str, str]]:
        """The body (the job's summary) and its headers, signed now."""
        # The delivery's own record, `callback`, is not part of the summary.
        summary = {key: value for key, value in self.summary(job).items() if key != "callback"}
        body = json.dumps(summary, separators=(",", ":")).encode()
        return body, {
            "Content-Type": "application/json",
            SIGNATURE_HEADER: signature(secret, int(time.time()), body),
        }

    async def record(self, due: CallbackDue, status: int | None, error: str | None) -> None:
        attempts = due.attempts + 1
        if error is None:
            state, next_at = "delivered", None
            log.info("jobs: callback of %s delivered (attempt %d)", due.job_id, attempts)
        elif attempts >= self.settings.callback_attempts:
            state, next_at = "failed", None
            log.warning(
                "jobs: callback of %s failed after %d attempts (last: %s)",
                due.job_id,
                attempts,
                error,
            )
        else:
            wait_s = backoff_s(self.settings.callback_backoff_s, attempts)
            state, next_at = "pending", time.time() + wait_s
            log.info(
                "jobs: callback of %s: attempt %d failed (%s); next in %.1f s",
                due.job_id,
                attempts,
                error,
                wait_s,
            )
        await asyncio.to_thread(
            self.store.callback_attempted, due.job_id, status, error, state, next_at
        )

    def secret(self, owner: str) -> str:
        """The key a job's callback is signed with: its owner's (the key file's
        `callback-secret=`), else --callback-secret."""
        return self.tenancy.for_owner(owner).callback_secret or self.settings.callback_secret

    async def close(self) -> None:
        """Stop sending (an attempt cut short is made again after the restart)."""
        for task in list(self.sending.values()):
            task.cancel()
        await asyncio.gather(*self.sending.values(), return_exceptions=True)
        await self.client.aclose()
