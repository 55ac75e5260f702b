"""A WebSocket speech session through Starlette's TestClient (tests/helpers/app_client.py): what
the server sent, each text frame as JSON and each binary frame as bytes, up to its close."""

from __future__ import annotations

import json
from typing import Any

from starlette.testclient import WebSocketTestSession

PATH = "/v1/audio/speech/stream"


def received(ws: WebSocketTestSession, until: str | None = None) -> tuple[list[Any], int | None]:
    """The server's messages up to its close (with its code), or up to the first message of type
    `until` (code None)."""
    out: list[Any] = []
    while True:
        message = ws.receive()
        if message["type"] == "websocket.close":
            return out, message.get("code", 1000)
        if message.get("bytes") is not None:
            out.append(message["bytes"])
            continue
        body = json.loads(message["text"])
        out.append(body)
        if body["type"] == until:
            return out, None


def kinds(messages: list[Any]) -> list[str]:
    """Each message's type; "bytes" for an audio frame."""
    return ["bytes" if isinstance(m, bytes) else m["type"] for m in messages]
