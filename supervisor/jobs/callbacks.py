"""Job callbacks: which addresses a job may name, and how a callback is signed.

A callback goes only to a host and port on `--callback-allow`, so a client cannot make the
server send requests to an address of its choosing (its own metadata service, a database on the
loopback). The entries are read with the settings (supervisor/settings/callback_allow.py). With
no allow-list, no job may name one.

A URL is checked as it will be sent: it is read by the sender's own parser (httpx) and by the
standard library's, and refused unless both read the same scheme, host and port with no
credentials; control characters and whitespace anywhere are refused before either reads it
(httpx would refuse some only at send time, and read others differently).

The signature follows the common webhook scheme: `X-OmniVoice-Signature: t=<unix seconds>,v1=<hex
HMAC-SHA256 of "<t>.<body>">` keyed with the job's own `callback_secret` when its body gave one,
else its owner's secret (CallbackSender.secret). The receiver recomputes it over the raw body and
refuses a `t` too far from its clock, so a captured callback cannot be replayed later.
"""

from __future__ import annotations

import hashlib
import hmac
import unicodedata
import urllib.parse
from typing import Any

import httpx

from supervisor.errors import InvalidRequest
from supervisor.settings.callback_allow import DEFAULT_PORTS, allowed_entries

SIGNATURE_HEADER = "X-OmniVoice-Signature"
# A job's own callback secret: long enough to resist guessing, printable ASCII without spaces
# (what a receiver's config file or environment variable holds unchanged).
SECRET_CHARS = (16, 256)
SECRET_PATTERN = f"^[!-~]{{{SECRET_CHARS[0]},{SECRET_CHARS[1]}}}$"
MAX_URL_CHARS = 2048


def invalid(message: str) -> InvalidRequest:
    return InvalidRequest(message, param="callback_url")


def refused(message: str) -> InvalidRequest:
    error = invalid(message)
    error.code = "callback_not_allowed"
    return error


def unsafe_char(url: str) -> tuple[int, str] | None:
    """The first control, format or whitespace character of `url` (C0, DEL, C1, zero-width...)."""
    for position, char in enumerate(url):
        if char.isspace() or unicodedata.category(char) in ("Cc", "Cf", "Zs", "Zl", "Zp"):
            return position, char
    return None


def as_sent(url: str) -> httpx.URL:
    """The URL as the sender reads it, if the standard library reads the same scheme, host and
    port with no credentials; InvalidRequest otherwise."""
    try:
        sent = httpx.URL(url)
        split = urllib.parse.urlsplit(url)
        split_port = split.port
    except (httpx.InvalidURL, ValueError) as exc:  # bad port, `[127.0.0.1]`, ...
        raise invalid(f"'callback_url' is not a valid URL ({exc}): {url!r}.") from None
    if sent.scheme not in DEFAULT_PORTS or not sent.raw_host:
        raise invalid(f"'callback_url' must be an http or https URL with a host; got {url!r}.")
    if sent.userinfo or split.username is not None or split.password is not None:
        raise invalid(
            "'callback_url' must not carry credentials: callbacks are signed "
            "(X-OmniVoice-Signature) instead."
        )
    if not (split.hostname or "").isascii():
        raise invalid(
            "'callback_url' must name its host in ASCII (an international name in its "
            f"xn-- form); got {split.hostname!r}."
        )
    default = DEFAULT_PORTS[sent.scheme]
    ours = (split.scheme.lower(), split.hostname, split_port or default)
    theirs = (sent.scheme, sent.raw_host.decode("ascii").lower(), sent.port or default)
    if ours != theirs:
        raise invalid(
            f"'callback_url' is ambiguous: it reads as host {theirs[1]!r} port "
            f"{theirs[2]} and as host {ours[1]!r} port {ours[2]}; got {url!r}."
        )
    return sent


def check_url(url: Any, allow: tuple[str, ...]) -> str:
    """The URL if a callback may go there; InvalidRequest (400) saying why not."""
    if not isinstance(url, str) or not 0 < len(url) <= MAX_URL_CHARS:
        raise invalid(
            f"'callback_url' must be an http or https URL of at most {MAX_URL_CHARS} characters."
        )
    found = unsafe_char(url)
    if found is not None:
        raise invalid(
            f"'callback_url' must not contain whitespace or control characters; "
            f"found U+{ord(found[1]):04X} at position {found[0]}."
        )
    sent = as_sent(url)
    if not allow:
        raise refused(
            "This server sends no callbacks: it was started without --callback-allow. "
            "Leave out 'callback_url', or ask its operator to allow your host."
        )
    host, port = sent.raw_host.decode("ascii").lower(), sent.port or DEFAULT_PORTS[sent.scheme]
    entries = allowed_entries(allow)
    if not any(entry.admits(host, port, sent.scheme) for entry in entries):
        if any(entry.host == host for entry in entries):
            raise refused(
                f"Callbacks may not go to port {port} of {host!r}: that port is not on "
                "this server's --callback-allow list (a bare host allows its scheme's "
                f"default port only; HOST:PORT allows another)."
            )
        raise refused(
            f"Callbacks may not go to {host!r}: it is not on this server's --callback-allow list."
        )
    return url


def receiver_host(url: str) -> str:
    """The host a callback goes to, as the sender connects to it ('' for a URL it cannot read)."""
    try:
        return httpx.URL(url).raw_host.decode("ascii").lower()
    except (httpx.InvalidURL, UnicodeDecodeError):
        return ""


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """The X-OmniVoice-Signature value for a body sent at `timestamp` (Unix seconds)."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"t={timestamp},v1={mac.hexdigest()}"


def check_secret(secret: Any) -> str:
    """A job's `callback_secret`, checked; InvalidRequest (never echoing it) otherwise."""
    low, high = SECRET_CHARS
    if not isinstance(secret, str) or not low <= len(secret) <= high:
        raise InvalidRequest(
            f"'callback_secret' must be a string of {low} to {high} characters.",
            param="callback_secret",
        )
    if not all("!" <= c <= "~" for c in secret):
        raise InvalidRequest(
            "'callback_secret' must be printable ASCII without spaces (characters '!' to '~').",
            param="callback_secret",
        )
    return secret
