"""Dialogue scripts (`dialogue: true`): each `[voice] text` line a turn in its voice, checked
through the seeds, designs and prompts a real SynthesisRun hands to the scheduler, with the pause
asked for between turns."""

from __future__ import annotations

from typing import Any

import pytest

from sidecar.shared.text import CHUNK_SEED_STRIDE
from supervisor.errors import InvalidRequest
from supervisor.settings import Settings
from supervisor.speech.request import schemas
from supervisor.speech.request.voice import Voice
from tests.helpers.synthesis_driver import LEVEL, RATE, drive

PROMPT = {
    "tokens": {"shape": [8, 30], "data": bytes(8 * 30 * 2)},
    "ref_text": "A saved voice.",
    "ref_rms": 0.1,
}
VOICES = {
    "narrator": Voice(prompt=PROMPT),
    "alloy": Voice(instruct=schemas.OPENAI_VOICES["alloy"], seed=schemas.default_seed("alloy")),
    "onyx": Voice(instruct=schemas.OPENAI_VOICES["onyx"], seed=schemas.default_seed("onyx")),
}
SCRIPT = "[alloy] Hi, I am Alice.\n[onyx] And I am Bob.\n\n[alloy] Nice to meet you,\nBob.\n[narrator] They shook hands."


def seed(voice: str, index: int) -> int:
    return (schemas.default_seed(voice) + index * CHUNK_SEED_STRIDE) % 2**63


def test_each_turn_is_read_in_its_voice_with_pauses_between() -> None:
    run = drive({"input": SCRIPT, "dialogue": True, "pause_ms": 750}, voices=VOICES.__getitem__)
    sent = {p["text"]: p for p in run.payloads}
    assert list(sent) == [
        "Hi, I am Alice.",
        "And I am Bob.",
        "They shook hands.",
        "Nice to meet you, Bob.",
    ]
    alice, bob, again, narrator = (
        sent[t]
        for t in ("Hi, I am Alice.", "And I am Bob.", "Nice to meet you, Bob.", "They shook hands.")
    )
    assert (alice["instruct"], alice["seed"]) == (schemas.OPENAI_VOICES["alloy"], seed("alloy", 0))
    assert (bob["instruct"], bob["seed"]) == (schemas.OPENAI_VOICES["onyx"], seed("onyx", 1))
    assert (again["instruct"], again["seed"]) == (schemas.OPENAI_VOICES["alloy"], seed("alloy", 2))
    assert again["voice"]["ref_text"] == "Hi, I am Alice."  # Alice's later turn continues her first
    assert alice["return_tokens"] and "voice" not in bob and "return_tokens" not in bob
    assert narrator["voice"] == PROMPT and "instruct" not in narrator
    pause = bytes(2 * round(0.75 * RATE))
    assert [p.audio for p in run.pieces] == [LEVEL * 2400 + pause] * 3 + [LEVEL * 2400]


def test_the_default_pause_is_300_ms_and_a_request_seed_wins() -> None:
    run = drive(
        {"input": "[alloy] One.\n[onyx] Two.", "dialogue": True, "seed": 9},
        voices=VOICES.__getitem__,
    )
    assert [p["seed"] for p in run.payloads] == [9, (9 + CHUNK_SEED_STRIDE) % 2**63]
    assert run.pieces[0].audio == LEVEL * 2400 + bytes(2 * round(0.3 * RATE))


def test_without_dialogue_brackets_are_read_as_text() -> None:
    assert [p["text"] for p in drive({"input": "[alloy] Hi."}).payloads] == ["[alloy] Hi."]


@pytest.mark.parametrize(
    ("body", "param", "says"),
    [
        ({"input": "Hello.\n[alloy] Hi.", "dialogue": True}, "input", "line 1 has no speaker"),
        ({"input": "[ ] Hi.", "dialogue": True}, "input", "empty [ ]"),
        ({"input": "[alloy] Hi.\n[onyx]", "dialogue": True}, "input", "[onyx] has nothing to say"),
        ({"input": "Hi.", "pause_ms": 200}, "pause_ms", "with 'dialogue': true"),
        (
            {"input": "[alloy] Hi.", "dialogue": True, "pause_ms": 10_001},
            "pause_ms",
            "between 0 and 10000",
        ),
        ({"input": "<speak>Hi.</speak>", "dialogue": True}, "dialogue", "<voice name=...>"),
        ({"input": "[alloy] Hi.", "dialogue": "yes"}, "dialogue", "boolean"),
    ],
)
def test_a_bad_script_is_a_400(body: dict[str, Any], param: str, says: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        schemas.speech_request(body, Settings(engine="null").speech)
    assert caught.value.param == param and says in str(caught.value)
