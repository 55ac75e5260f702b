"""Job callbacks: which addresses a job may name, and how a callback is signed.

A callback goes only to a host on `--callback-allow` (the URL's host name or IP literal, compared
without case), so a client cannot make the server send requests to an address of its choosing
(its own metadata service, a database on the loopback). With no allow-list, no job may name one.

The signature follows the common webhook scheme: `X-OmniVoice-Signature: t=<unix seconds>,v1=<hex
HMAC-SHA256 of "<t>.<body>">` with `--callback-secret` as the key. The receiver recomputes it
over the raw body and refuses a `t` too far from its clock, so a captured callback cannot be
replayed later.

"""

from __future__ import annotations

import hashlib
import hmac
import urllib.parse
from typing import Any

from supervisor.errors import InvalidRequest

SIGNATURE_HEADER = "X-OmniVoice-Signature"
MAX_URL_CHARS = 2048


def refused(message: str) -> InvalidRequest:
    error = InvalidRequest(message, param="callback_url")
    error.code = "callback_not_allowed"
    return error


def check_url(url: Any, allow: tuple[str, ...]) -> str:
    """The URL if a callback may go there; InvalidRequest (400) saying why not."""
    if not isinstance(url, str) or not 0 < len(url) <= MAX_URL_CHARS:
        raise InvalidRequest(
            f"'callback_url' must be an http or https URL of at most {MAX_URL_CHARS} characters.",
            param="callback_url",
        )
    parts = urllib.parse.urlsplit(url)
    try:
        parts.port  # noqa: B018 (a port out of range or not a number raises here)
    except ValueError:
        raise InvalidRequest(f"'callback_url' has an invalid port: {url!r}.",
                             param="callback_url") from None  # fmt: skip
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidRequest(
            f"'callback_url' must be an http or https URL with a host; got {url!r}.",
            param="callback_url",
        )
    if parts.username is not None or parts.password is not None:
        raise InvalidRequest("'callback_url' must not carry credentials: callbacks are signed "
                             "(X-OmniVoice-Signature) instead.", param="callback_url")  # fmt: skip
    if not allow:
        raise refused(
            "This server sends no callbacks: it was started without --callback-allow. "
            "Leave out 'callback_url', or ask its operator to allow your host."
        )
    if parts.hostname.lower() not in {host.lower() for host in allow}:
        raise refused(f"Callbacks may not go to {parts.hostname!r}: it is not on this server's "
                      "--callback-allow list.")  # fmt: skip
    return url


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """The X-OmniVoice-Signature value for a body sent at `timestamp` (Unix seconds)."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"t={timestamp},v1={mac.hexdigest()}"
