"""Text handling for a request: combining, cleaning, tokenising, punctuating and chunking text.

Every function here reproduces the reference OmniVoice runtime (omnivoice 0.2.1) exactly, quirks
included, because the model was trained on text prepared this way and the parity fixtures hold
us to it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from sidecar.shared.duration import FRAME_RATE

if TYPE_CHECKING:  # only for annotations: tokenizers is imported by whoever loads the checkpoint
    import tokenizers

__all__ = [
    "ABBREVIATIONS",
    "CHUNK_SEED_STRIDE",
    "CLOSING_MARKS",
    "END_PUNCTUATION",
    "NONVERBAL_TAGS",
    "SPLIT_PUNCTUATION",
    "add_punctuation",
    "chunk_char_len",
    "chunk_text",
    "combine_text",
    "contains_cjk",
    "tokenize_text",
]

# Chunk i of an item is seeded with the item's seed plus i times this stride (odd, so successive
# chunks get distinct seeds), by the runtime for the chunks it makes and by the supervisor for
# its own; so one seed (X-Seed) reproduces a whole chunked response.
CHUNK_SEED_STRIDE = 0x9E3779B97F4A7C15

# --- Data tables: from k2-fsa/OmniVoice (omnivoice/utils/text.py, omnivoice/models/omnivoice.py),
# --- Apache-2.0.

# The 13 non-verbal tags the model was trained with, written in the text as "[tag]".
NONVERBAL_TAGS: tuple[str, ...] = (
    "laughter",
    "sigh",
    "confirmation-en",
    "question-en",
    "question-ah",
    "question-oh",
    "question-ei",
    "question-yi",
    "surprise-ah",
    "surprise-oh",
    "surprise-wa",
    "surprise-yo",
    "dissatisfaction-hnn",
)

# A sentence may end after any of these (ASCII and full-width forms).
SPLIT_PUNCTUATION: frozenset[str] = frozenset(".,;:!?。，；：！？")

# Closing quotes and brackets: they belong to the sentence they close.
CLOSING_MARKS: frozenset[str] = frozenset("\"'“”‘’）]》>」】")

# Text already ending in one of these gets no extra stop. "……" is a two-character entry that can
# never equal a single last character; it is kept because the reference table has it.
END_PUNCTUATION: frozenset[str] = frozenset(
    {
        ";",
        ":",
        ",",
        ".",
        "!",
        "?",
        "…",
        ")",
        "]",
        "}",
        '"',
        "'",
        "“",
        "”",
        "‘",
        "’",
        "；",
        "：",
        "，",
        "。",
        "！",
        "？",
        "、",
        "……",
        "）",
        "】",
    }
)

# A "." right after one of these words does not end a sentence.
ABBREVIATIONS: frozenset[str] = frozenset(
    {
        "Mr.",
        "Mrs.",
        "Ms.",
        "Dr.",
        "Prof.",
        "Sr.",
        "Jr.",
        "Rev.",
        "Fr.",
        "Hon.",
        "Pres.",
        "Gov.",
        "Capt.",
        "Gen.",
        "Sen.",
        "Rep.",
        "Col.",
        "Maj.",
        "Lt.",
        "Cmdr.",
        "Sgt.",
        "Cpl.",
        "Co.",
        "Corp.",
        "Inc.",
        "Ltd.",
        "Est.",
        "Dept.",
        "St.",
        "Ave.",
        "Blvd.",
        "Rd.",
        "Mt.",
        "Ft.",
        "No.",
        "Jan.",
        "Feb.",
        "Mar.",
        "Apr.",
        "Aug.",
        "Sep.",
        "Sept.",
        "Oct.",
        "Nov.",
        "Dec.",
        "i.e.",
        "e.g.",
        "vs.",
        "Vs.",
        "Etc.",
        "approx.",
        "fig.",
        "def.",
    }
)

# --- end of the upstream tables.

# The reference's notion of "Chinese": CJK Unified Ideographs only (not kana, not extension
# blocks). It decides the full stop in add_punctuation, the whitespace rule in combine_text and
# the instruct language, so it must stay exactly this range.
_CJK_RE = re.compile(r"[\u4e00-\u9fff]")

# One capturing group around the whole tag, so re.split keeps the tags in its output.
_TAG_SPLIT_RE = re.compile(r"(\[(?:" + "|".join(re.escape(t) for t in NONVERBAL_TAGS) + r")\])")

_NEWLINES_RE = re.compile(r"[\r\n]+")
_BLANKS_RE = re.compile(r"[ \t]+")
# Any whitespace run touching an ideograph on either side; Chinese is written without spaces and
# the model never saw them there.
_SPACE_BY_CJK_RE = re.compile(r"(?<=[\u4e00-\u9fff])\s+|\s+(?=[\u4e00-\u9fff])")


def contains_cjk(text: str | None) -> bool:
    """True when the text holds at least one CJK Unified Ideograph (U+4E00..U+9FFF)."""
    if not text:
        return False
    return _CJK_RE.search(text) is not None


def combine_text(text: str, ref_text: str | None) -> str:
    """Join reference and target text and clean it the way the model's training text was cleaned."""
    # An empty ref_text counts as none, as in the reference (a plain truthiness test).
    full = f"{ref_text.strip()} {text.strip()}" if ref_text else text.strip()
    # Line breaks are deleted, not turned into spaces: "hi\nthere" becomes "hithere".
    full = _NEWLINES_RE.sub("", full)
    full = full.replace("\uff08", "(").replace("\uff09", ")")
    full = _BLANKS_RE.sub(" ", full)
    return _SPACE_BY_CJK_RE.sub("", full)


def tokenize_text(tokenizer: tokenizers.Tokenizer, wrapped_text: str) -> list[int]:
    """Token ids of a wrapped text, with every non-verbal tag tokenised on its own."""
    # Tokenising each stretch separately puts a BPE boundary at every tag, so a tag always gets
    # the same ids whatever surrounds it (the reference does this; whole-string tokenising would
    # differ whenever a tag is present). The <|...|> markers are added tokens and are matched
    # inside the first and last stretches by the tokenizer itself.
    ids: list[int] = []
    pieces = 0
    for piece in _TAG_SPLIT_RE.split(wrapped_text):
        if not piece:
            continue
        piece_ids = tokenizer.encode(piece, add_special_tokens=False).ids
        if piece_ids:
            ids.extend(piece_ids)
            pieces += 1
    if pieces == 0:
        # Nothing produced any id (e.g. an empty string): the reference then tokenises the whole
        # text once more with special tokens on, which for this tokenizer family adds none.
        return list(tokenizer.encode(wrapped_text, add_special_tokens=True).ids)
    return ids


def add_punctuation(text: str) -> str:
    """Strip the text and end it with a stop ("。" for Chinese, else ".") unless it already has one."""
    text = text.strip()
    if text and text[-1] not in END_PUNCTUATION:
        text += "。" if contains_cjk(text) else "."
    return text


def chunk_char_len(
    target_len: int, text: str, chunk_duration: float, frame_rate: int = FRAME_RATE
) -> int:
    """Characters per chunk for a long item: chunk_duration seconds at the item's frames-per-character."""
    # Same operation order as the reference, so the int() truncation lands identically.
    frames_per_char = target_len / len(text)
    return int(chunk_duration * frame_rate / frames_per_char)


def chunk_text(text: str, chunk_len: int, min_chunk_len: int | None = 3) -> list[str]:
    """Split long text into chunks of about chunk_len characters at sentence and clause ends."""
    sentences = _split_sentences(text)
    chunks = _merge_greedily(sentences, chunk_len)
    if min_chunk_len is not None:
        chunks = _fold_short_chunks(chunks, min_chunk_len)
    # Lengths above are measured before stripping, as in the reference; strip only at the end.
    out = []
    for chunk in chunks:
        stripped = "".join(chunk).strip()
        if stripped:
            out.append(stripped)
    return out


def _split_sentences(text: str) -> list[list[str]]:
    """Cut after every split mark, except a "." that closes a known abbreviation."""
    sentences: list[list[str]] = []
    current: list[str] = []
    for ch in text:
        if not current and sentences and (ch in SPLIT_PUNCTUATION or ch in CLOSING_MARKS):
            # A mark that would open a sentence ('."' or '?!') closes the previous one instead.
            # It is not tested as a split point itself: the previous sentence already ended.
            sentences[-1].append(ch)
            continue
        current.append(ch)
        if ch in SPLIT_PUNCTUATION and not (ch == "." and _ends_with_abbreviation(current)):
            sentences.append(current)
            current = []
    if current:
        sentences.append(current)
    return sentences


def _ends_with_abbreviation(chars: list[str]) -> bool:
    words = "".join(chars).split()
    return bool(words) and words[-1] in ABBREVIATIONS


def _merge_greedily(sentences: list[list[str]], chunk_len: int) -> list[list[str]]:
    """Pack consecutive sentences while the running length stays within chunk_len."""
    chunks: list[list[str]] = []
    current: list[str] = []
    for sentence in sentences:
        if len(current) + len(sentence) <= chunk_len:
            current = current + sentence
        else:
            # A sentence longer than chunk_len still becomes a chunk of its own; nothing is cut
            # mid-sentence.
            if current:
                chunks.append(current)
            current = list(sentence)
    if current:
        chunks.append(current)
    return chunks


def _fold_short_chunks(chunks: list[list[str]], min_len: int) -> list[list[str]]:
    """Fold chunks under min_len characters into their predecessor (a short first one into the second)."""
    first_is_short = bool(chunks) and len(chunks[0]) < min_len
    out: list[list[str]] = []
    for i, chunk in enumerate(chunks):
        # The reference folds the second chunk into a short first one whatever the second's
        # length, and otherwise folds any short chunk backwards.
        if (i == 1 and first_is_short) or (out and len(chunk) < min_len):
            out[-1] = out[-1] + chunk
        else:
            out.append(list(chunk))
    return out
