"""The benchmark's requests, the same for every arm: deterministic texts and voices from a seed.

Lengths and shares follow DESIGN ("Bench results"): short 8-20 words, medium 30-60, long
120-250 (chunked); mixed = 60 % short, 30 % medium, 10 % long; voices 90 % auto or an OpenAI
voice name, 5 % design, 5 % clone with a 5 s prompt.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

WORDS = [
    "the",
    "a",
    "morning",
    "river",
    "town",
    "baker",
    "bread",
    "oven",
    "street",
    "children",
    "winter",
    "snow",
    "market",
    "square",
    "lantern",
    "quiet",
    "harbour",
    "ship",
    "sailor",
    "wind",
    "evening",
    "light",
    "window",
    "garden",
    "stone",
    "bridge",
    "road",
    "valley",
    "forest",
    "mountain",
    "station",
    "train",
    "ticket",
    "letter",
    "music",
    "band",
    "summer",
    "night",
    "library",
    "weekend",
    "committee",
    "debate",
    "summer",
    "coffee",
    "table",
    "friend",
    "family",
    "village",
    "story",
    "teacher",
    "lesson",
    "question",
    "answer",
    "rain",
    "cloud",
    "bright",
    "early",
    "late",
    "small",
    "large",
    "old",
    "new",
    "warm",
    "cold",
    "green",
    "blue",
    "golden",
    "silver",
    "walked",
    "waited",
    "opened",
    "closed",
    "carried",
    "gathered",
    "listened",
    "remembered",
    "smiled",
    "answered",
    "travelled",
    "slowly",
    "quickly",
    "gently",
    "finally",
    "suddenly",
    "always",
    "never",
    "often",
    "together",
    "outside",
    "across",
    "beyond",
    "and",
    "but",
    "while",
    "because",
    "after",
    "before",
    "when",
    "although",
    "since",
    "until",
]
INSTRUCTS = (
    "female, young adult, high pitch",
    "male, middle-aged, low pitch",
    "female, elderly",
    "male, british accent",
    "female, whisper",
    "male, teenager, moderate pitch",
)
OPENAI_VOICES = ("alloy", "echo", "fable", "onyx", "nova", "shimmer")
SINGLE_TEXT = "The quick brown fox jumps over the lazy dog near the river bank."  # 12 words, ~3 s
CLONE_REF_TEXT = "A five second reference clip, spoken clearly and calmly."


@dataclass(frozen=True)
class Request:
    text: str
    kind: str  # auto, openai, design, clone
    voice: str  # "auto", an OpenAI name, or the saved clone voice's name
    instruct: str | None
    seed: int

    @property
    def words(self) -> int:
        return len(self.text.split())


def sentence_text(rng: random.Random, num_words: int) -> str:
    """Sentences of 6-14 words with commas and stops, capitalised, ending in a stop."""
    words, out = [], []
    while len(words) < num_words:
        n = min(rng.randint(6, 14), num_words - len(words))
        chunk = [rng.choice(WORDS) for _ in range(n)]
        if n > 7 and rng.random() < 0.5:
            chunk[rng.randint(2, n - 3)] += ","
        chunk[0] = chunk[0].capitalize()
        out.append(" ".join(chunk) + rng.choice(".!?" if rng.random() < 0.2 else "."))
        words += chunk
    return " ".join(out)


def pick_voice(
    rng: random.Random, shares: tuple[float, float, float]
) -> tuple[str, str, str | None]:
    """(kind, voice, instruct) with the given shares of design and clone; the rest auto/OpenAI."""
    design, clone = shares[1], shares[2]
    r = rng.random()
    if r < design:
        return "design", "auto", rng.choice(INSTRUCTS)
    if r < design + clone:
        return "clone", "bench-clone", None
    if rng.random() < 0.5:
        return "auto", "auto", None
    return "openai", rng.choice(OPENAI_VOICES), None


def mixed(n: int = 1000, seed: int = 1) -> list[Request]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        r = rng.random()
        words = (
            rng.randint(8, 20)
            if r < 0.6
            else rng.randint(30, 60)
            if r < 0.9
            else rng.randint(120, 250)
        )
        kind, voice, instruct = pick_voice(rng, (0.90, 0.05, 0.05))
        out.append(Request(sentence_text(rng, words), kind, voice, instruct, seed * 100_000 + i))
    return out


def short(n: int = 1000, seed: int = 2) -> list[Request]:
    """Workload (a): short speech and design requests (no clone)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        kind, voice, instruct = pick_voice(rng, (0.90, 0.10, 0.0))
        out.append(
            Request(
                sentence_text(rng, rng.randint(8, 20)), kind, voice, instruct, seed * 100_000 + i
            )
        )
    return out


def clone_reference(seconds: float = 5.0, sample_rate: int = 24000) -> list[float]:
    """A deterministic 5 s voiced-sounding clip (harmonics with a slow envelope) as floats."""
    import math

    rng = random.Random(7)
    out = []
    for n in range(int(seconds * sample_rate)):
        t = n / sample_rate
        env = 0.5 + 0.5 * math.sin(2 * math.pi * 3.1 * t)
        f0 = 140 + 20 * math.sin(2 * math.pi * 0.7 * t)
        v = sum(math.sin(2 * math.pi * f0 * k * t) / k for k in range(1, 6))
        out.append(0.12 * env * v + 0.005 * (rng.random() - 0.5))
    return out
