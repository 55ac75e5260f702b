"""What the live-server tests say: four short sentences of several kinds, and a paragraph of
three (several chunks at `--chunk-s 2`)."""

from __future__ import annotations

SENTENCES = [
    "The 6:15 to Brighton is delayed by ten minutes.",
    "Please stand clear of the closing doors.",
    "Chapter one. It was a bright cold day in April.",
    "The museum will close in fifteen minutes.",
]
LONG = (
    "The harbour was quiet that morning. Mr. Smith walked down to the pier, carrying a basket of bread. "
    "Nobody else was there; the boats rocked gently in the grey water."
)
