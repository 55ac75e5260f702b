"""One chapter as one file, when the chapter was made as several items (its parts): the parts'
audio joined into one FLAC, their captions into one SRT or WebVTT file, each part's cues moved
on by the audio of the parts before it.

The captions are those the items were written with (`supervisor.speech.text.captions`): cues
separated by blank lines, each with a `start --> end` line; SRT's cue numbers are numbered
again, WebVTT's header is kept once.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from supervisor.books import audio
from supervisor.speech.audio import formats

STAMP = re.compile(r"(\d{2,}):(\d{2}):(\d{2})([,.])(\d{3})")
VTT_HEADER = "WEBVTT"


def joined_audio(parts: Sequence[bytes]) -> bytes:
    """The parts' results (any format the server writes) as one FLAC file."""
    return formats.encode("flac", b"".join(audio.decoded(part) for part in parts), audio.RATE)


def _stamp(millis: int, decimal: str) -> str:
    hours, rest = divmod(millis, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    seconds, millis = divmod(rest, 1000)
    return f"{hours:02d}:{minutes:02d}:{seconds:02d}{decimal}{millis:03d}"


def _moved(line: str, offset_ms: int) -> str:
    def shift(match: re.Match[str]) -> str:
        hours, minutes, seconds, decimal, millis = match.groups()
        total = ((int(hours) * 60 + int(minutes)) * 60 + int(seconds)) * 1000 + int(millis)
        return _stamp(total + offset_ms, decimal)

    return STAMP.sub(shift, line)


def _cues(text: str) -> list[list[str]]:
    blocks = [block.strip("\n").split("\n") for block in re.split(r"\n\s*\n", text.strip())]
    return [block for block in blocks if block and block != [""] and block[0] != VTT_HEADER]


def joined_captions(parts: Sequence[str], seconds: Sequence[float], kind: str) -> str:
    """The parts' captions (`kind` "srt" or "vtt") as one file; `seconds`: each part's audio."""
    out: list[str] = []
    offset_ms = 0
    for text, length in zip(parts, seconds, strict=True):
        for cue in _cues(text):
            timing = next(i for i, line in enumerate(cue) if "-->" in line)
            lines = [_moved(cue[timing], offset_ms), *cue[timing + 1 :]]
            if kind == "srt":
                lines.insert(0, str(len(out) + 1))
            out.append("\n".join(lines) + "\n")
        offset_ms += round(length * 1000)
    body = "\n".join(out)
    return f"{VTT_HEADER}\n\n{body}" if kind == "vtt" else body
