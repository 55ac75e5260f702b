"""Word error rate of a transcript against the text that was read, and the longest run of
diverging words: the round-trip checks `wer` and `divergent_run` (docs/RELIABILITY.md).

Both texts are normalised the same way first: Unicode NFKC, case folded, punctuation dropped,
and split into words, a character of a script written without spaces (CJK, kana, Thai, ...)
counting as a word. The alignment is the usual Levenshtein one over words (substitution,
insertion, deletion all cost 1). A run of diverging words is a stretch of the alignment with no
match in it; its length counts the words of the longer side (so 3 words read as 2 others is 3).
Audiobook tools regenerate when 8 or more consecutive words diverge (Audicle #96).
"""

from __future__ import annotations

import re
import unicodedata

_UNSPACED = re.compile(
    "([\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u0e00-\u0eff\u1000-\u109f"
    "\u1780-\u17ff\U00020000-\U0003ffff])"
)
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")


def words(text: str) -> list[str]:
    """The words of a text, normalised for comparison."""
    folded = unicodedata.normalize("NFKC", text).casefold().replace("’", "'")
    return _WORD.findall(_UNSPACED.sub(r" \1 ", folded))


def compare(reference: str, hypothesis: str) -> tuple[float, int]:
    """(word error rate, longest diverging run) of what was heard against what was meant.

    The rate is edits / reference words (1.0 for an empty reference with anything heard, 0.0
    when both are empty); it may exceed 1 when much more was heard than written."""
    ref, hyp = words(reference), words(hypothesis)
    if not ref:
        return (1.0 if hyp else 0.0), len(hyp)
    # cost[i][j]: edits turning ref[:i] into hyp[:j]
    cost = [[0] * (len(hyp) + 1) for _ in range(len(ref) + 1)]
    for i in range(len(ref) + 1):
        cost[i][0] = i
    for j in range(len(hyp) + 1):
        cost[0][j] = j
    for i in range(1, len(ref) + 1):
        for j in range(1, len(hyp) + 1):
            same = ref[i - 1] == hyp[j - 1]
            cost[i][j] = min(
                cost[i - 1][j - 1] + (0 if same else 1), cost[i - 1][j] + 1, cost[i][j - 1] + 1
            )
    return cost[-1][-1] / len(ref), _longest_run(ref, hyp, cost)


def _longest_run(ref: list[str], hyp: list[str], cost: list[list[int]]) -> int:
    """Walk one optimal alignment back; the longest stretch between matches, in words."""
    i, j = len(ref), len(hyp)
    longest = run_ref = run_hyp = 0
    while i or j:
        if i and j and ref[i - 1] == hyp[j - 1] and cost[i][j] == cost[i - 1][j - 1]:
            i, j = i - 1, j - 1
            run_ref = run_hyp = 0
            continue
        if i and j and cost[i][j] == cost[i - 1][j - 1] + 1:
            i, j, run_ref, run_hyp = i - 1, j - 1, run_ref + 1, run_hyp + 1
        elif i and cost[i][j] == cost[i - 1][j] + 1:
            i, run_ref = i - 1, run_ref + 1
        else:
            j, run_hyp = j - 1, run_hyp + 1
        longest = max(longest, run_ref, run_hyp)
    return longest
