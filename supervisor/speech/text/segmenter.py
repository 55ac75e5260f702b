"""Text that arrives piece by piece (the WebSocket's `input.text`) cut into segments to speak.

A segment ends at a sentence end that is known to be one: followed by whitespace or more text
(so "3." waits to see whether "14" follows, and "Mr. " is no end, by `chunking.atoms`' rules), or
a sentence mark other than a full stop at the very end of what has come. A run of text with no
sentence end is cut once it is longer than `max_chars`: at its last clause mark within them,
else its last word boundary, else at `max_chars`. A flush (`input.done`) makes a segment of
whatever is left.
"""

from __future__ import annotations

import itertools

from supervisor.speech.text.chunking import SENTENCE_ENDS, Atom, atoms


class Segmenter:
    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
        self.text = ""  # what has come and is not cut yet

    def feed(self, text: str) -> list[str]:
        """The segments the text completes (none, one or several), found in one pass over what
        is not cut yet, so a long message costs time in proportion to its length."""
        self.text += text
        pieces = atoms(self.text)
        cuts: list[int] = []
        start = at = 0
        best: tuple[int, int] | None = None  # (strength, end) of the best gap since `start`
        for i, atom in enumerate(pieces):
            at += len(atom.text)
            if _ends_sentence(atom, i == len(pieces) - 1):
                cuts.append(at)
                start, best = at, None
                continue
            while at - start > self.max_chars:  # too long without an end: the best gap, or here
                start = best[1] if best is not None else start + self.max_chars
                cuts.append(start)
                best = None
            if (
                i < len(pieces) - 1
                and atom.strength >= 1
                and (best is None or atom.strength >= best[0])
            ):
                best = (atom.strength, at)
        bounds = [0, *cuts]
        out = [self.text[a:b].strip() for a, b in itertools.pairwise(bounds)]
        self.text = self.text[bounds[-1] :]
        return [segment for segment in out if segment]

    def flush(self) -> list[str]:
        """Whatever is left, as a last segment (none if it is only whitespace)."""
        segment, self.text = self.text.strip(), ""
        return [segment] if segment else []


def _ends_sentence(atom: Atom, last: bool) -> bool:
    """Whether the gap after an atom is a sentence end known to be one: it is followed by more
    text or whitespace, or its mark is one no number or abbreviation ends with."""
    if atom.strength < 3:
        return False
    core = atom.text.rstrip()
    return not last or core != atom.text or (bool(core) and core[-1] in SENTENCE_ENDS - {"."})
