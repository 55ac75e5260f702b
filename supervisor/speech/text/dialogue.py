"""A dialogue script (`dialogue: true`): one turn per line, `[voice] text`, read as spans.

The voice is a saved voice, an OpenAI voice name or `auto`, resolved as a request's `voice`
is. A line without a `[voice]` continues the turn before it; blank lines are skipped.
`pause_ms` of silence is stitched between turns (none after the last).
"""

from __future__ import annotations

import re

from supervisor.errors import InvalidRequest
from supervisor.speech.text.spans import Script, Span

DEFAULT_PAUSE_MS = 300
TURN = re.compile(r"\[([^\[\]]*)\]\s*(.*)")


def parse(text: str, pause_ms: int) -> Script:
    turns: list[tuple[str, list[str]]] = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        found = TURN.fullmatch(line)
        if found is None:
            if not turns:
                raise InvalidRequest(
                    f"dialogue: line {number} has no speaker; start each turn with [voice], "
                    "such as '[alloy] Hello.'",
                    param="input",
                )
            turns[-1][1].append(line)
            continue
        voice, said = found.group(1).strip(), found.group(2)
        if not voice:
            raise InvalidRequest(
                f"dialogue: line {number} has an empty [ ]; name a voice in it", param="input"
            )
        turns.append((voice, [said] if said else []))
    spoken = [(voice, " ".join(lines)) for voice, lines in turns]
    empty = next((voice for voice, said in spoken if not said), None)
    if not spoken or empty is not None:
        raise InvalidRequest(
            f"dialogue: the turn of [{empty}] has nothing to say"
            if empty
            else "dialogue: there are no turns",
            param="input",
        )
    last = len(spoken) - 1
    return Script(
        tuple(
            Span(said, voice=voice, pause_s=0.0 if i == last else pause_ms / 1000)
            for i, (voice, said) in enumerate(spoken)
        )
    )
