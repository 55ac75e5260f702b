"""supervisor/speech/text/ssml.py through a real SynthesisRun: what reaches the model for each element,
the silence stitched for <break>, and the 400 a bad document gets (naming the element)."""

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
}


def texts(document: str, **fields: Any) -> list[str]:
    return [p["text"] for p in drive({"input": document, "seed": 3, **fields}).payloads]


@pytest.mark.parametrize(
    ("document", "spoken"),
    [
        ('<speak><sub alias="World Wide Web">WWW</sub> rocks.</speak>', "World Wide Web rocks."),
        ('<speak>Say <say-as interpret-as="characters">IBM</say-as>.</speak>', "Say I B M."),
        (
            '<speak>I have <say-as interpret-as="cardinal">1234</say-as> cats.</speak>',
            "I have one thousand, two hundred and thirty-four cats.",
        ),
        ('<speak>The <say-as interpret-as="ordinal">3</say-as> time.</speak>', "The third time."),
        (
            '<speak>On <say-as interpret-as="date">2024-03-05</say-as>.</speak>',
            "On March fifth, twenty twenty-four.",
        ),
        (
            '<speak>Call <say-as interpret-as="telephone">+1 555-0199</say-as>.</speak>',
            "Call plus one, five five five, zero one nine nine.",
        ),
        (
            '<speak xml:lang="de">Der <say-as interpret-as="ordinal">3</say-as> Tag.</speak>',
            "Der dritte Tag.",
        ),
        ("<speak>\n  Plain   text,\n  spaced out.\n</speak>", "Plain text, spaced out."),
    ],
)
def test_text_elements_reach_the_model_as_words(document: str, spoken: str) -> None:
    assert texts(document, language="en") == [spoken]


def test_break_is_silence_stitched_between_chunks() -> None:
    run = drive(
        {
            "input": '<speak><break time="200ms"/>One.<break time="1.5s"/>Two.<break/>Three.</speak>',
            "seed": 3,
        }
    )
    assert [p["text"] for p in run.payloads] == ["One.", "Two.", "Three."]
    audio = [p.audio for p in run.pieces]
    spoken = LEVEL * 2400
    assert audio[0] == bytes(2 * round(0.2 * RATE)) + spoken + bytes(2 * round(1.5 * RATE))
    assert audio[1] == spoken + bytes(2 * round(0.5 * RATE))  # a bare <break/> is "medium": 0.5 s
    assert audio[2] == spoken
    assert run.synthesis.audio_s == pytest.approx(
        (3 * 2400 + 0.2 * RATE + 1.5 * RATE + 0.5 * RATE) / RATE
    )


def test_prosody_rate_is_speed_times_the_requests() -> None:
    run = drive(
        {
            "input": '<speak>Normal. <prosody rate="slow">Slow.</prosody> <prosody rate="150%">Fast '
            '<prosody rate="2">faster.</prosody></prosody></speak>',
            "speed": 1.2,
            "seed": 3,
        }
    )
    assert [(p["text"], p["speed"]) for p in run.payloads] == [
        ("Normal.", 1.2),
        ("Slow.", pytest.approx(0.9)),
        ("Fast", pytest.approx(1.8)),
        ("faster.", pytest.approx(3.6)),
    ]


def test_lang_sets_each_spans_language() -> None:
    run = drive(
        {
            "input": '<speak>Hello. <lang xml:lang="de">Guten Tag.</lang> <lang xml:lang="French">Salut.</lang></speak>',
            "language": "en",
            "seed": 3,
        }
    )
    assert [(p["text"], p["language"]) for p in run.payloads] == [
        ("Hello.", "en"),
        ("Guten Tag.", "de"),
        ("Salut.", "fr"),
    ]


def test_voice_reads_a_span_in_a_saved_or_named_voice() -> None:
    document = '<speak>Hello. <voice name="narrator">Once upon a time.</voice> <voice name="alloy">Hi!</voice> Bye.</speak>'
    run = drive({"input": document}, voice=Voice(instruct="male"), voices=VOICES.__getitem__)
    by_text = {p["text"]: p for p in run.payloads}
    assert by_text["Hello."]["instruct"] == "male" and "voice" not in by_text["Hello."]
    assert (
        by_text["Once upon a time."]["voice"] == PROMPT
    )  # the saved voice's prompt, not chunk 0's audio
    alloy = by_text["Hi!"]
    assert alloy["instruct"] == schemas.OPENAI_VOICES["alloy"] and "voice" not in alloy
    assert alloy["seed"] == (schemas.default_seed("alloy") + 2 * CHUNK_SEED_STRIDE) % 2**63
    # The request's own voice is continued: "Bye." is prompted with "Hello."'s audio.
    assert by_text["Hello."]["return_tokens"] and by_text["Bye."]["voice"]["ref_text"] == "Hello."


def test_normalize_applies_inside_ssml_spans() -> None:
    assert texts(
        '<speak>At 9:30 <break time="100ms"/> <lang xml:lang="de">um 9:30</lang></speak>',
        normalize=True,
        language="en",
    ) == ["At nine thirty", "um neun Uhr dreißig"]


def test_duration_with_several_spans_is_refused() -> None:
    with pytest.raises(InvalidRequest) as caught:
        drive({"input": '<speak>One.<break time="1s"/>Two.</speak>', "duration": 3.0})
    assert caught.value.param == "duration"


@pytest.mark.parametrize(
    ("document", "named"),
    [
        ("<speak><emphasis>loud</emphasis></speak>", "<emphasis>"),
        ("<speak><break time='1s'>", "not well-formed"),
        ("<speak>a < b</speak>", "not well-formed"),
        ('<!DOCTYPE speak [<!ENTITY lol "lol">]><speak>&lol;&lol;</speak>', "DTD or entities"),
        ('<speak><break time="forever"/>x</speak>', "<break time='forever'>"),
        ('<speak><break time="11s"/>x</speak>', "longer than the 10 s"),
        (
            '<speak><prosody pitch="high">x</prosody></speak>',
            "<prosody> does not take the attribute 'pitch'",
        ),
        ('<speak><prosody rate="warp">x</prosody></speak>', "<prosody rate='warp'>"),
        (
            '<speak><say-as interpret-as="spell-out">x</say-as></speak>',
            "<say-as interpret-as='spell-out'>",
        ),
        ('<speak><say-as interpret-as="ordinal">third</say-as></speak>', "ordinal"),
        ("<speak><sub>x</sub></speak>", "<sub> needs an alias"),
        ("<speak><voice>x</voice></speak>", "<voice> needs a name"),
        ('<speak><lang xml:lang="klingon-ish">x</lang></speak>', "unknown language"),
        ("<speak><speak>x</speak></speak>", "cannot be nested"),
        ('<speak><break time="1s"/></speak>', "no text"),
    ],
)
def test_a_bad_document_is_a_400_naming_what_is_wrong(document: str, named: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        schemas.speech_request({"input": document}, Settings(engine="null").speech)
    assert (
        caught.value.param == "input"
        and caught.value.status == 400
        and caught.value.code == "invalid_ssml"
    )
    assert named in str(caught.value)


def test_input_that_does_not_start_with_speak_is_plain_text() -> None:
    assert texts("Use <b>bold</b> & <speak> tags.") == ["Use <b>bold</b> & <speak> tags."]
