"""Sentence captions: each sentence is its own chunk, so its timing in the audio is exact.

`sentences` cuts a text where `chunking` sees a sentence end (not after "Mr." and friends) or
a line break; `srt` and `vtt` write segments {"text", "start", "end"} (seconds) as SubRip and
WebVTT: a cue per segment, or, when the segments carry `words` (word timestamps), a cue per
word.
"""

from __future__ import annotations

from typing import TypedDict

from supervisor.speech.text import chunking

SENTENCE_GAP = 3  # chunking's strength of the gap after a sentence end or a line break


class Word(TypedDict):
    word: str
    start: float
    end: float


class _Timed(TypedDict):
    text: str
    start: float
    end: float


class Segment(_Timed, total=False):
    words: list[Word]  # with word timestamps


def cues(segments: list[Segment]) -> list[tuple[float, float, str]]:
    """(start, end, text) of each cue: each word where the segments have words, else each
    segment."""
    out: list[tuple[float, float, str]] = []
    for s in segments:
        if "words" in s:
            out.extend((w["start"], w["end"], w["word"]) for w in s["words"])
        else:
            out.append((s["start"], s["end"], s["text"]))
    return out


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
    lines = [
        f"{i}\n{_stamp(start, ',')} --> {_stamp(end, ',')}\n{_cue_text(text)}\n"
        for i, (start, end, text) in enumerate(cues(segments), 1)
    ]
    return "\n".join(lines)


def vtt(segments: list[Segment]) -> str:
    lines = [
        f"{_stamp(start, '.')} --> {_stamp(end, '.')}\n{_vtt_escape(_cue_text(text))}\n"
        for start, end, text in cues(segments)
    ]
    return "WEBVTT\n\n" + "\n".join(lines)
