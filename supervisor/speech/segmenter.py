"""Text that arrives piece by piece (the WebSocket's `input.text`) cut into segments to speak.

A segment ends at a sentence end that is known to be one: followed by whitespace or more text
(so "3." waits to see whether "14" follows, and "Mr. " is no end, by `chunking.atoms`' rules), or
a sentence mark other than a full stop at the very end of what has come. A run of text with no
sentence end is cut once it is longer than `max_chars`: at its last clause mark within them,
else its last word boundary, else at `max_chars`. A flush (`input.done`) makes a segment of
whatever is left.
"""

from __future__ import annotations

from supervisor.speech.chunking import SENTENCE_ENDS, atoms


class Segmenter:
    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
        self.text = ""  # what has come and is not cut yet

    def feed(self, text: str) -> list[str]:
        """The segments the text completes (none, one or several)."""
        self.text += text
        out: list[str] = []
        while (cut := self._sentence_end()) is not None or (cut := self._length_cut()) is not None:
            segment, self.text = self.text[:cut].strip(), self.text[cut:]
            if segment:
                out.append(segment)
        return out

    def flush(self) -> list[str]:
        """Whatever is left, as a last segment (none if it is only whitespace)."""
        segment, self.text = self.text.strip(), ""
        return [segment] if segment else []

    def _sentence_end(self) -> int | None:
        """The end of the first sentence known to be complete, in characters; None if none."""
        pieces = atoms(self.text)
        at = 0
        for i, atom in enumerate(pieces):
            at += len(atom.text)
            if atom.strength < 3:
                continue
            last = i == len(pieces) - 1
            core = atom.text.rstrip()
            if not last or core != atom.text or (core and core[-1] in SENTENCE_ENDS - {"."}):
                return at
        return None

    def _length_cut(self) -> int | None:
        """Where to cut a run longer than max_chars; None if it is not that long."""
        if len(self.text.strip()) <= self.max_chars:
            return None
        best: tuple[int, int] | None = None  # (strength, end)
        at = 0
        for atom in atoms(self.text)[:-1]:
            at += len(atom.text)
            if at > self.max_chars:
                break
            if atom.strength >= 1 and (best is None or atom.strength >= best[0]):
                best = (atom.strength, at)
        return best[1] if best is not None else self.max_chars
