"""The `synth` command's HTTP: JSON with the standard library, waiting out a server that is
unreachable or busy (429, 503, a dropped connection) for up to --retry-s, and downloads that
land whole or not at all."""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, TextIO

HTTP_TIMEOUT_S = 60.0


class Incomplete(Exception):
    """The run cannot go on now (server unreachable); a later run resumes."""


class Client:
    """JSON over HTTP with the standard library; waits out an unreachable or busy server for up to retry_s."""

    def __init__(self, base: str, api_key: str | None, retry_s: float, log: TextIO) -> None:
        self.base = base.rstrip("/")
        self.api_key = api_key
        self.retry_s = retry_s
        self.log = log

    def _open(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.base + path, data=data, method=method, headers=dict(headers or {})
        )
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if self.api_key:
            request.add_header("Authorization", f"Bearer {self.api_key}")
        return urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S)

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
        consume: Any = None,
    ) -> tuple[int, Any]:
        """(status, JSON body) of the first answer that is not 429/503 nor a dropped connection.

        `consume(response)` reads a successful answer instead of parsing it as JSON.
        """
        give_up_at, delay, said = time.monotonic() + self.retry_s, 0.5, False
        while True:
            try:
                with self._open(method, path, body, headers) as response:
                    return response.status, consume(response) if consume else json.loads(
                        response.read() or b"null"
                    )
            except urllib.error.HTTPError as exc:
                payload = exc.read()
                if exc.code not in (429, 503):
                    try:
                        return exc.code, json.loads(payload)
                    except ValueError:
                        return exc.code, {
                            "error": {"message": payload.decode(errors="replace")[:500]}
                        }
                wait = float(exc.headers.get("Retry-After") or delay)
                reason = f"HTTP {exc.code}"
            except (urllib.error.URLError, OSError) as exc:
                wait, reason = delay, str(getattr(exc, "reason", exc))
            if time.monotonic() + wait > give_up_at:
                raise Incomplete(
                    f"{self.base} did not answer {method} {path} for {self.retry_s:g} s (last: {reason})"
                )
            if not said:
                print(
                    f"\nsynth: {self.base}: {reason}; retrying for up to {self.retry_s:g} s",
                    file=self.log,
                    flush=True,
                )
                said = True
            time.sleep(wait)
            delay = min(5.0, delay * 2)

    def download(self, path: str, dest: Path) -> tuple[int, Any]:
        """The answer's body into dest, whole or not at all (temporary name, then rename)."""
        tmp = dest.with_name(f".{dest.name}.part")

        def save(response: Any) -> None:
            expected = response.headers.get("Content-Length")
            written = 0
            with open(tmp, "wb") as out:
                while chunk := response.read(1 << 16):
                    out.write(chunk)
                    written += len(chunk)
                out.flush()
                os.fsync(out.fileno())
            # http.client ends a body cut short (the server killed mid-answer) as if it were
            # whole; a short file must not be renamed into place. Retried like a dropped line.
            if expected is not None and written != int(expected):
                raise ConnectionResetError(f"the answer ended after {written} of {expected} bytes")
            os.replace(tmp, dest)

        try:
            return self.request("GET", path, consume=save)
        finally:
            tmp.unlink(missing_ok=True)
