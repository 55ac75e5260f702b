"""Long input to chunks of about `chunk_s` seconds each, for the scheduler to run as tasks.

Text is measured in estimated speaking time, with the reference duration rule's per-character
weights (`sidecar.shared.duration`): an ideograph weighs three Latin letters, a Hangul syllable two and
a half, a Thai letter one and a half. It is cut into atoms first:

- scripts written without spaces between words (Chinese, Japanese kana, Thai, Lao, Khmer,
  Myanmar) and Hangul give one atom per character;
- every other script gives one atom per word;
- punctuation and closing quotes stay with the atom they follow, whitespace too.

Each gap between atoms gets a strength: 4 after a blank line, 3 after the end of a sentence
(not after "Mr." and friends), 2 after a clause mark (comma, semicolon, colon, dash, 、) or at a
space in a script that uses spaces only between phrases (Thai), 1 at a word boundary or between
two ideographs, 0 inside a word (Thai letters, Hangul syllables, a giant "word" such as a URL).

A text estimated at up to twice `chunk_s` stays whole, as the reference runtime keeps texts
under its 30 s threshold whole. A longer one becomes n = round(total / chunk_s) chunks: each cut
aims at an equal share of what is left and takes the strongest gap within a quarter of a chunk
of that aim, the nearest one among equals. So chunks come out balanced, and end at sentence
ends where the text allows. Every chunk stays well under the runtime's own chunking threshold,
so the runtime never splits a task again.

An answer played as it comes (`starts_short`: SSE, a raw `pcm` stream, the WebSocket) starts with a
short chunk, so that its first audio comes after a short generation (`first_chunk`): the text up to
its first sentence end within FIRST_CHUNK_CHARS characters, else up to its first clause mark past
FIRST_CHUNK_MIN_CHARS, else up to its last word boundary within them. The rule reads the text
alone, never the load, so a seeded answer sounds the same however busy the server is; the rest is
chunked as above.

A job item may ask for a short first chunk of its own length (`lead_chunk`, the item's
`first_chunk_s`; audiobooks do): in the concurrent chunk mode the first chunk is the voice prompt
of every later one, and a prompt as long as a whole chunk makes each later chunk's forward
passes longer than its own audio needs. Its end is chosen as a chunk's is, within WINDOW of its
aim; the rest is chunked as above.
"""

from __future__ import annotations

import itertools
import unicodedata
from dataclasses import dataclass

from sidecar.shared.duration import FRAME_RATE, target_tokens, text_weight
from sidecar.shared.text import ABBREVIATIONS, CLOSING_MARKS

SENTENCE_ENDS = frozenset(".!?…。！？｡؟।॥።჻‼⁇⁈⁉")
CLAUSE_MARKS = frozenset(",;:，；：、—–·־")
WINDOW = 0.25  # how far from its aim a cut may go, in chunks
WHOLE_UP_TO = 2.0  # input up to this many chunk lengths stays one chunk
GIANT_WORD = 0.25  # a word longer than this many chunks is cut anywhere inside
FIRST_CHUNK_CHARS = 80  # a streamed answer's first chunk ends within this many characters
FIRST_CHUNK_MIN_CHARS = 12  # ... and, at a clause mark, not before this many (no lone "Well,")

# Blocks whose characters are atoms of their own: (first, last, strength between two of them).
_CHARACTER_SCRIPTS: tuple[tuple[int, int, int], ...] = (
    (0x0E00, 0x0EFF, 0),  # Thai, Lao
    (0x1000, 0x109F, 0),  # Myanmar
    (0x1100, 0x11FF, 0),  # Hangul jamo
    (0x1780, 0x17FF, 0),  # Khmer
    (0x3040, 0x30FF, 1),  # Hiragana, Katakana
    (0x3130, 0x318F, 0),  # Hangul compatibility jamo
    (0x31F0, 0x31FF, 1),  # Katakana extensions
    (0x3400, 0x4DBF, 1),  # CJK extension A
    (0x4E00, 0x9FFF, 1),  # CJK unified ideographs
    (0xAC00, 0xD7AF, 0),  # Hangul syllables
    (0xF900, 0xFAFF, 1),  # CJK compatibility ideographs
    (0xFF66, 0xFF9F, 1),  # half-width katakana
    (0x20000, 0x3FFFF, 1),  # CJK extensions B and later
)
# Scripts that put spaces between phrases rather than words: a space there is a clause break.
_PHRASE_SPACED = ((0x0E00, 0x0EFF), (0x1000, 0x109F), (0x1780, 0x17FF))


@dataclass
class Atom:
    text: str
    weight: float
    strength: int  # of the gap after it


def _character_script(ch: str) -> int | None:
    """Strength between two characters of a script written without spaces; None for other scripts."""
    code = ord(ch)
    for first, last, strength in _CHARACTER_SCRIPTS:
        if first <= code <= last:
            return strength
    return None


def _phrase_spaced(ch: str) -> bool:
    return any(first <= ord(ch) <= last for first, last in _PHRASE_SPACED)


def _attached(ch: str) -> bool:
    """Characters that belong to the atom before them: marks, punctuation, symbols."""
    return unicodedata.category(ch)[0] in "MPS" and _character_script(ch) is None


def _end_strength(core: str, is_word: bool) -> int:
    """Strength of the gap after an atom, from how its text (without whitespace) ends."""
    stripped = core.rstrip("".join(CLOSING_MARKS))
    last = stripped[-1:] if stripped else ""
    if last in SENTENCE_ENDS:
        if (
            is_word
            and last == "."
            and (core in ABBREVIATIONS or (len(core) == 2 and core[0].isalpha()))
        ):
            return 1  # "Dr." or an initial such as "J."
        return 3
    if last in CLAUSE_MARKS:
        return 2
    return 0


def atoms(text: str) -> list[Atom]:
    """The text as atoms with the strength of the gap after each; their texts join to the input."""
    out: list[Atom] = []
    i, n = 0, len(text)
    leading = len(text) - len(text.lstrip())
    if leading:
        out.append(Atom(text[:leading], 0.0, 0))
        i = leading
    while i < n:
        inner = _character_script(text[i])
        j = i + 1
        if inner is None:  # a word: up to whitespace or a character-script character
            while j < n and not text[j].isspace() and _character_script(text[j]) is None:
                j += 1
        else:
            while j < n and _attached(text[j]):
                j += 1
        core = text[i:j]
        k = j
        while k < n and text[k].isspace():
            k += 1
        space = text[j:k]
        strength = _end_strength(core, inner is None)
        if k >= n:
            pass
        elif space:
            breaks = space.count("\n")
            strength = max(
                strength,
                4
                if breaks >= 2
                else 3
                if breaks
                else 2
                if inner is not None and _phrase_spaced(text[i])
                else 1,
            )
        elif inner is not None and _character_script(text[k]) is not None:
            strength = max(strength, min(inner, _character_script(text[k]) or 0))
        else:
            strength = max(strength, 1)  # a word running into ideographs, or the other way round
        if all(unicodedata.category(c) in ("Ps", "Pi") for c in core):
            strength = 0  # an opening bracket or quote belongs with what it opens
        out.append(Atom(core + space, text_weight(core + space), strength))
        i = k
    return out


def _explode(atom: Atom) -> list[Atom]:
    """A giant word as single characters, cuttable anywhere (strength 0) but at its end."""
    chars = [Atom(ch, text_weight(ch), 0) for ch in atom.text]
    chars[-1].strength = atom.strength
    return chars


def estimate_s(
    text: str,
    ref_text: str | None = None,
    ref_frames: int | None = None,
    speed: float | None = None,
) -> float:
    """Seconds of audio the reference duration rule expects for a text."""
    return target_tokens(text, ref_text, ref_frames, speed=speed) / FRAME_RATE


def split_text(
    text: str, chunk_s: float, total_s: float | None = None, whole_s: float | None = None
) -> list[str]:
    """Chunks of about chunk_s seconds of audio; `total_s` is the whole text's estimate if known;
    a text estimated at up to `whole_s` (default: twice chunk_s) stays whole."""
    total_s = estimate_s(text) if total_s is None else total_s
    if total_s <= (WHOLE_UP_TO * chunk_s if whole_s is None else whole_s) or not text.strip():
        return [text.strip()]
    count = max(2, round(total_s / chunk_s))
    pieces = atoms(text)
    ideal = sum(a.weight for a in pieces) / count
    if ideal <= 0:
        return [text.strip()]
    exploded: list[Atom] = []
    for atom in pieces:
        exploded.extend(
            _explode(atom) if atom.weight > GIANT_WORD * ideal and len(atom.text) > 1 else [atom]
        )
    return [chunk for chunk in _cut(exploded, count) if chunk]


def lead_chunk(text: str, lead_s: float, total_s: float) -> tuple[str, str]:
    """A first chunk of about `lead_s` seconds of a text estimated at `total_s`, and the rest
    (stripped); (text, "") when the text is no longer than twice that."""
    text = text.strip()
    if total_s <= WHOLE_UP_TO * lead_s or not text:
        return text, ""
    pieces = atoms(text)
    cumulative = list(itertools.accumulate(a.weight for a in pieces))
    aim = cumulative[-1] * lead_s / total_s
    lo, hi = aim * (1 - WINDOW), aim * (1 + WINDOW)
    gaps = range(len(pieces) - 1)  # the last atom is never a cut
    inside = [i for i in gaps if lo <= cumulative[i] <= hi]
    if inside:
        cut = max(inside, key=lambda i: (pieces[i].strength, -abs(cumulative[i] - aim)))
    elif gaps:
        cut = min(gaps, key=lambda i: abs(cumulative[i] - aim))
    else:
        return text, ""
    head = "".join(a.text for a in pieces[: cut + 1]).strip()
    return head, "".join(a.text for a in pieces[cut + 1 :]).strip()


def is_word(atom: Atom) -> bool:
    """A word, or a character of a script written without spaces; not punctuation."""
    return any(ch.isalnum() for ch in atom.text)


def split_words(text: str, words: int) -> list[str]:
    """Chunks of about `words` words each (omnivoice-triton-server's --text-chunk-words), cut at
    the same breaks as split_text; a character of a script written without spaces counts as a
    word, punctuation as nothing. A text of up to twice `words` stays whole."""
    pieces = atoms(text)
    for atom in pieces:
        atom.weight = 1.0 if is_word(atom) else 0.0
    total = sum(a.weight for a in pieces)
    if total <= WHOLE_UP_TO * words or not text.strip():
        return [text.strip()]
    return [chunk for chunk in _cut(pieces, max(2, round(total / words))) if chunk]


def _cut(pieces: list[Atom], count: int) -> list[str]:
    cumulative = list(itertools.accumulate(a.weight for a in pieces))
    total = cumulative[-1]
    cuts: list[int] = []  # a cut at i: the chunk ends after pieces[i]
    done = 0.0
    previous = -1
    for k in range(count - 1):
        share = (total - done) / (count - k)
        aim = done + share
        lo, hi = aim - WINDOW * share, aim + WINDOW * share
        best: tuple[float, float] | None = None
        chosen = -1
        # The last atom is never a cut: every chunk must hold something.
        for i in range(previous + 1, len(pieces) - 1):
            if cumulative[i] < lo:
                continue
            if cumulative[i] > hi:
                break
            key = (pieces[i].strength, -abs(cumulative[i] - aim))
            if best is None or key > best:
                best, chosen = key, i
        if chosen < 0:  # nothing inside the window: the nearest gap after the last cut
            candidates = range(previous + 1, len(pieces) - 1)
            if not candidates:
                break
            chosen = min(candidates, key=lambda i: abs(cumulative[i] - aim))
        cuts.append(chosen)
        previous, done = chosen, cumulative[chosen]
    bounds = [-1, *cuts, len(pieces) - 1]
    return [
        "".join(a.text for a in pieces[bounds[j] + 1 : bounds[j + 1] + 1]).strip()
        for j in range(len(bounds) - 1)
    ]


def starts_short(stream_format: str, response_format: str) -> bool:
    """Whether a speech answer is played as it comes, so its first chunk is made short: SSE, and
    raw `pcm` (OpenAI's own streaming example plays it as it arrives). Other formats of
    `stream_format` "audio" are files, which keep the throughput-friendly chunking."""
    return stream_format == "sse" or response_format == "pcm"


def first_chunk(text: str) -> tuple[str, str]:
    """A streamed answer's short first chunk and the rest (stripped); (text, "") when the text is
    short already or has no gap to cut at within FIRST_CHUNK_CHARS."""
    text = text.strip()
    if len(text) <= FIRST_CHUNK_CHARS:
        return text, ""
    pieces = atoms(text)
    ends = list(itertools.accumulate(len(a.text) for a in pieces))  # characters up to each gap
    inside = [i for i in range(len(pieces) - 1) if ends[i] <= FIRST_CHUNK_CHARS]
    sentence = next((i for i in inside if pieces[i].strength >= 3), None)
    clause = next(
        (i for i in inside if pieces[i].strength == 2 and ends[i] >= FIRST_CHUNK_MIN_CHARS), None
    )
    word = next((i for i in reversed(inside) if pieces[i].strength >= 1), None)
    cut = next((i for i in (sentence, clause, word) if i is not None), None)
    if cut is None:
        return text, ""
    return "".join(a.text for a in pieces[: cut + 1]).strip(), "".join(
        a.text for a in pieces[cut + 1 :]
    ).strip()
