"""OpenAI's free-form `instructions` read as voice design: the items the text names, no more.

Code written for gpt-4o-mini-tts sends prose ("Speak in a cheerful and positive tone."). The
model takes only design items (sidecar/shared/voice_design.py), so by default we take the items the
text names (and a few plain words for them: "woman" is female), at most one per category, and
ignore the rest; the X-OmniVoice-Instructions response header says which is which.
`--strict-instructions` answers such text with a 400 instead.
"""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass

from sidecar.shared.voice_design import INSTRUCT_CATEGORIES, VALID_INSTRUCT_ITEMS

HEADER = "X-OmniVoice-Instructions"

# Plain words for items, as prose names them.
SYNONYMS = {
    "woman": "female",
    "women": "female",
    "lady": "female",
    "girl": "female",
    "man": "male",
    "men": "male",
    "gentleman": "male",
    "boy": "male",
    "kid": "child",
    "teen": "teenager",
    "old": "elderly",
    "elderly person": "elderly",
    "whispering": "whisper",
    "whispered": "whisper",
    "whispers": "whisper",
    "whispery": "whisper",
}
# Longest first, so "very low pitch" wins over "low pitch" and "young adult" over nothing shorter.
_NAMES = sorted([*VALID_INSTRUCT_ITEMS, *SYNONYMS], key=len, reverse=True)
# An English name is a whole word ("man" is not in "human", "old" not in "30-year-old").
_ITEM_RE = re.compile(
    "|".join(
        rf"(?<![\w-]){re.escape(n)}(?![\w-])" if n.isascii() else re.escape(n) for n in _NAMES
    ),
    re.IGNORECASE,
)
_CLAUSE_RE = re.compile(r"[^.,;:!?。，；：！？\n]+[.,;:!?。，；：！？]*")
_CATEGORY = {item: cat for cat, members in INSTRUCT_CATEGORIES.items() for item in members}
# One or the other: accents are for English speech, dialects for Chinese.
_ACCENT_OR_DIALECT = ("accent", "dialect")


@dataclass(frozen=True)
class Reading:
    """What free-form instructions gave: the items used (in order) and the clauses ignored."""

    used: tuple[str, ...]
    ignored: tuple[str, ...]

    @property
    def instructions(self) -> str | None:
        """The design the model gets (None: let it choose a voice)."""
        return ", ".join(self.used) or None

    def header(self) -> str:
        """`used=female,low pitch; ignored=Speak in a cheerful tone.`, off ASCII percent-encoded."""
        value = f"used={','.join(self.used)}; ignored={' '.join(self.ignored)}"
        return urllib.parse.quote(value, safe=" !\"#$&'()*+,-./:;<=>?@[]^_`{|}~")


def read_free_form(text: str) -> Reading:
    """Take the design items `text` names, at most one per category (the first); ignore the rest."""
    used: list[str] = []
    taken: set[str] = set()
    ignored: list[str] = []
    for clause in (m.group().strip() for m in _CLAUSE_RE.finditer(text)):
        named = False
        for match in _ITEM_RE.finditer(clause):
            item = SYNONYMS.get(match.group().lower(), match.group().lower())
            category = _CATEGORY[item]
            clash = taken & set(_ACCENT_OR_DIALECT) if category in _ACCENT_OR_DIALECT else set()
            named = True
            if category not in taken and not clash:
                used.append(item)
                taken.add(category)
            else:  # a second gender, pitch...: the first one named wins
                ignored.append(match.group())
        if not named and clause:
            ignored.append(clause)
    return Reading(tuple(used), tuple(ignored))
