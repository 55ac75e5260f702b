"""Checks on the request headers the server reads, before anything reads them.

- Each must be UTF-8: Starlette decodes header values as Latin-1, so bytes that are not UTF-8
  would be read as other text than the client meant (an Idempotency-Key, a content type).
- A header the server reads as one value (Idempotency-Key, Content-Type) is a 400 when sent
  more than once: which one a proxy and this server each read is not left to chance.
  Authorization's own check is auth.py's (every path); Host's is edge.py's.
"""

from __future__ import annotations

from starlette.types import Scope

from supervisor.errors import InvalidRequest

READ = frozenset(
    {
        b"host",
        b"authorization",
        b"idempotency-key",
        b"content-type",
        b"origin",
        b"sec-fetch-site",
    }
)
SINGLE = (b"idempotency-key", b"content-type")


def header_error(scope: Scope) -> InvalidRequest | None:
    """A 400 naming the first header read that is not UTF-8, or sent twice when read once."""
    seen: set[bytes] = set()
    for name, value in scope["headers"]:
        if name not in READ:
            continue
        shown = name.decode("ascii", "replace").title()
        try:
            value.decode("utf-8")
        except UnicodeDecodeError:
            error = InvalidRequest(f"the {shown} header is not valid UTF-8", param=shown)
            error.code = "invalid_text"
            return error
        if name in SINGLE and name in seen:
            return InvalidRequest(f"send one {shown} header, not several", param=shown)
        seen.add(name)
    return None
