"""Sentence captions: each sentence is its own chunk, so its timing in the audio is exact.

`sentences` cuts a text where `chunking` sees a sentence end (not after "Mr." and friends) or
a line break; `srt` and `vtt` write segments {"text", "start", "end"} (seconds) as SubRip and
WebVTT. Word-level timing would need an aligner model; none runs here.
"""

from __future__ import annotations

from typing import TypedDict

from supervisor.speech import chunking

SENTENCE_GAP = 3  # chunking's strength of the gap after a sentence end or a line break


class Segment(TypedDict):
    text: str
    start: float
    end: float


def sentences(text: str) -> list[str]:
    out: list[str] = []
    current: list[str] = []
    for atom in chunking.atoms(text):
        current.append(atom.text)
        if atom.strength >= SENTENCE_GAP:
            out.append("".join(current).strip())
            current = []
    out.append("".join(current).strip())
    return [s for s in out if s]


def _stamp(seconds: float, decimal: str) -> str:
    millis = round(seconds * 1000)
    hours, rest = divmod(millis, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    secs, millis = divmod(rest, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}{decimal}{millis:03d}"


def _cue_text(text: str) -> str:
    return " ".join(text.split())  # a blank line would end the cue


def _vtt_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def srt(segments: list[Segment]) -> str:
    cues = [
        f"{i}\n{_stamp(s['start'], ',')} --> {_stamp(s['end'], ',')}\n{_cue_text(s['text'])}\n"
        for i, s in enumerate(segments, 1)
    ]
    return "\n".join(cues)


def vtt(segments: list[Segment]) -> str:
    cues = [
        f"{_stamp(s['start'], '.')} --> {_stamp(s['end'], '.')}\n"
        f"{_vtt_escape(_cue_text(s['text']))}\n"
        for s in segments
    ]
    return "WEBVTT\n\n" + "\n".join(cues)
