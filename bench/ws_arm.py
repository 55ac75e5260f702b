"""WebSocket first audio: `/v1/audio/speech/stream`, time from sending a sentence's end to the
first binary frame of its audio (the `ws_first_audio_p50_s` of a harness result).

Each repeat is a session of its own: `session.config`, then the sentence without its final stop
(nothing can be cut yet), then the stop, which ends the sentence; the clock starts there.
"""

from __future__ import annotations

import json
import time
from typing import Any

from http_arm import percentiles


async def first_audio(base_url: str, text: str, repeats: int) -> dict[str, Any]:
    import websockets  # the server's own dependency; imported here so the CPU tools need it not

    url = base_url.replace("http://", "ws://", 1) + "/v1/audio/speech/stream"
    body, stop = text.rstrip("."), "."
    first, whole = [], []
    for i in range(repeats):
        async with websockets.connect(url, max_size=None) as ws:
            config = {"type": "session.config", "response_format": "pcm", "seed": i}
            await ws.send(json.dumps(config))
            await ws.send(json.dumps({"type": "input.text", "text": body}))
            start = time.perf_counter()
            await ws.send(json.dumps({"type": "input.text", "text": stop + " "}))
            await ws.send(json.dumps({"type": "input.done"}))
            got_first = None
            async for message in ws:
                if isinstance(message, bytes):
                    if got_first is None:
                        got_first = time.perf_counter() - start
                    continue
                event = json.loads(message)
                if event.get("type") == "error":
                    raise RuntimeError(f"WebSocket session error: {event}")
                if event.get("type") == "session.done":
                    break
            first.append(got_first or 0.0)
            whole.append(time.perf_counter() - start)
            await ws.send(json.dumps({"type": "session.close"}))
    return {"sessions": repeats, "first_audio_s": percentiles(first), "total_s": percentiles(whole)}
