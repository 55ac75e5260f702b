"""supervisor/speech/synthesis/plan.py alone: chunks, which chunk prompts which, seeds, items and
cost, with no scheduler and no event loop."""

from __future__ import annotations

from typing import Any

import pytest

from sidecar.shared.text import CHUNK_SEED_STRIDE
from supervisor.errors import InvalidRequest
from supervisor.settings import Settings
from supervisor.speech.request import schemas
from supervisor.speech.request.voice import Voice
from supervisor.speech.synthesis import script
from supervisor.speech.synthesis.plan import Plan, Reading

SETTINGS = Settings(engine="null")
LONG = "The harbour was quiet that morning. Mr. Smith walked down to the pier. " * 8
PROMPT: Any = {
    "tokens": {"shape": [8, 30], "data": bytes(8 * 30 * 2)},
    "ref_text": "A saved voice.",
    "ref_rms": 0.1,
}


def plan(voice: Voice | None = None, reading: Reading | None = None, **fields: Any) -> Plan:
    request = schemas.speech_request({"input": LONG, "seed": 7, **fields}, SETTINGS.speech)
    text = script.read(request, SETTINGS.speech)
    return Plan(request, text, voice or Voice(), SETTINGS.speech, reading or Reading(chunk_s=4.0))


def test_concurrent_chunks_are_all_prompted_by_the_first_and_sequential_by_the_one_before() -> None:
    concurrent = plan(chunk_mode="concurrent")
    count = len(concurrent.chunks)
    assert count > 2 and len(concurrent.parts) == count
    assert [concurrent.prompter(i) for i in range(count)] == [None] + [0] * (count - 1)
    assert concurrent.leaders() == {0: list(range(1, count))}
    sequential = plan(chunk_mode="sequential")
    assert [sequential.prompter(i) for i in range(count)] == [None, *range(count - 1)]


def test_a_saved_voice_prompts_every_chunk_itself() -> None:
    saved = plan(voice=Voice(prompt=PROMPT), chunk_mode="concurrent")
    count = len(saved.chunks)
    assert [saved.prompter(i) for i in range(count)] == [None] * count
    assert all(saved.item(i)["voice"] == PROMPT for i in range(count))


def test_items_carry_the_chunk_its_seed_and_the_attempt() -> None:
    p = plan(chunk_mode="concurrent")
    first, second = p.item(0, return_tokens=True), p.item(1, prompt=PROMPT)
    assert first["id"] == f"{p.id}-0" and first["text"] == p.chunks[0]
    assert first["seed"] == 7 and first["return_tokens"] is True
    assert second["seed"] == (7 + CHUNK_SEED_STRIDE) % (schemas.MAX_SEED + 1)
    assert second["voice"] == PROMPT
    retry = p.item(1, attempt=2)
    assert retry["id"] == f"{p.id}-1.2" and retry["attempt"] == 2
    assert retry["seed"] != second["seed"]  # a retry draws another seed


def test_the_seed_and_id_are_drawn_only_when_nothing_gives_them() -> None:
    request = schemas.speech_request({"input": "Short."}, SETTINGS.speech)
    text = script.read(request, SETTINGS.speech)
    given = Plan(request, text, Voice(), SETTINGS.speech, Reading(4.0), seed=11, plan_id="abc")
    assert (given.seed, given.id, given.mode) == (11, "abc", "none")
    voiced = Plan(request, text, Voice(seed=5), SETTINGS.speech, Reading(4.0), seed=11)
    assert voiced.seed == 5  # a voice's own seed before a drawn one


def test_the_cost_counts_every_chunk_and_the_pauses() -> None:
    p = plan(input="<speak>Hello there.<break time='2s'/>Goodbye now.</speak>")
    assert p.cost.chunks == len(p.chunks) == 2
    assert p.cost.silence_s == pytest.approx(2.0) and p.cost.audio_s > 2.0


def test_a_duration_over_several_spans_or_chunks_is_refused() -> None:
    with pytest.raises(InvalidRequest) as spans:
        plan(input="<speak>One.<break time='1s'/>Two.</speak>", duration=3.0)
    assert spans.value.param == "duration"
    with pytest.raises(InvalidRequest) as chunked:
        plan(reading=Reading(4.0, captions=True), input="One. Two.", duration=3.0)
    assert chunked.value.param == "duration"


def test_a_voice_change_in_the_text_needs_a_resolver() -> None:
    document = '<speak>Hi. <voice name="narrator">Once.</voice></speak>'
    with pytest.raises(InvalidRequest, match="cannot change voices"):
        plan(input=document)
    narrated = plan(reading=Reading(4.0, voices=lambda name: Voice(instruct=name)), input=document)
    assert [part.voice.instruct for part in narrated.parts] == [None, "narrator"]


def test_a_first_chunk_of_its_own_length_prompts_the_rest() -> None:
    """A job item's `first_chunk_s`: chunk 0 about that long, the others at the chunk length,
    every later chunk prompted by chunk 0 as before, and the text all there."""
    from supervisor.speech.text.chunking import estimate_s

    text = LONG * 3
    usual = plan(reading=Reading(chunk_s=12.0), input=text)
    led = plan(reading=Reading(chunk_s=12.0, first_chunk_s=4.0), input=text)
    assert 3.0 <= estimate_s(led.chunks[0]) <= 5.0 < estimate_s(usual.chunks[0])
    assert all(estimate_s(chunk) > 8.0 for chunk in led.chunks[1:])
    assert "".join(led.chunks).replace(" ", "") == "".join(usual.chunks).replace(" ", "")
    assert led.leaders() == {0: list(range(1, len(led.chunks)))}
    captioned = plan(reading=Reading(chunk_s=12.0, captions=True, first_chunk_s=4.0), input=text)
    assert captioned.chunks == plan(reading=Reading(12.0, captions=True), input=text).chunks
