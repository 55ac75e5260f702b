"""A finished chunk as the voice prompt of the later chunks in its voice, cut to the continuity
limits (--max-continuity-audio-tokens, --max-continuity-text-words); and the length such a
prompt gives those chunks, known before anything runs.

The duration rule measures a prompted chunk against its prompt's speaking rate (frames per
unit of text), so a chunk that follows a short or slow one is longer than it would be alone:
admission counts it so (`prompted_frames`), or the audio made could outgrow the audio admitted.
"""

from __future__ import annotations

from sidecar.shared.duration import FRAME_RATE, target_tokens
from sidecar.shared.protocol import Item, Result, TokenArray, VoicePayload
from supervisor.speech.text import chunking


def continuity(
    result: Result, text: str, max_frames: int = 0, max_words: int = 0
) -> VoicePayload | None:
    """A finished chunk as the voice prompt of later chunks (None if the runtime split it itself),
    cut to its last `max_frames` codec frames and its last `max_words` words (0: all)."""
    tokens = result.get("tokens") or []
    if len(tokens) != 1:
        return None
    return {
        "tokens": last_frames(tokens[0], max_frames),
        "ref_text": last_words(text, max_words),
        "ref_rms": None,
    }


def last_frames(tokens: TokenArray, count: int) -> TokenArray:
    """The last `count` frames of [codebooks, frames] int16 tokens (row-major), or all of them."""
    codebooks, frames = tokens["shape"]
    if count <= 0 or frames <= count:
        return tokens
    data = memoryview(tokens["data"])
    rows = [
        data[(c * frames + frames - count) * 2 : (c + 1) * frames * 2] for c in range(codebooks)
    ]
    return {"shape": [codebooks, count], "data": b"".join(rows)}


def last_words(text: str, count: int) -> str:
    """The last `count` words of a text (a character of a script without spaces is a word), or all of it."""
    if count <= 0:
        return text
    pieces = chunking.atoms(text)
    words = [i for i, atom in enumerate(pieces) if chunking.is_word(atom)]
    if len(words) <= count:
        return text
    return "".join(atom.text for atom in pieces[words[-count] :]).strip()


def prompted_frames(
    items: list[Item], prompters: list[int | None], max_frames: int = 0, max_words: int = 0
) -> list[int]:
    """Each item's frames as the sidecar will generate them. Item i is prompted by the result
    of item `prompters[i]` (None: by its own voice, or not at all); such a prompt carries that
    item's frames and text, cut to the limits. Never less than the item alone, so a prompt
    that does not come (the runtime split its chunk) is covered too."""
    frames: list[int] = []
    for item, prompter in zip(items, prompters, strict=True):
        alone = _frames(item)
        if prompter is None or item.get("voice") or item.get("duration"):
            frames.append(alone)
            continue
        ref_frames = frames[prompter] if max_frames <= 0 else min(frames[prompter], max_frames)
        ref_text = last_words(items[prompter]["text"], max_words)
        speed = item.get("speed")
        frames.append(max(alone, target_tokens(item["text"], ref_text, ref_frames, speed=speed)))
    return frames


def _frames(item: Item) -> int:
    if item.get("duration"):
        return max(1, int(float(item["duration"]) * FRAME_RATE))  # type: ignore[arg-type]
    voice = item.get("voice")
    ref = (voice["ref_text"], voice["tokens"]["shape"][1]) if voice else (None, None)
    return target_tokens(item["text"], ref[0], ref[1], speed=item.get("speed"))
