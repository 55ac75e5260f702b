"""supervisor/speech/request/schemas.py: speech requests from JSON and forms; every bad field is a 400 naming it."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sidecar.shared.tiers import Tier
from supervisor.errors import InvalidRequest
from supervisor.settings import Settings
from supervisor.speech.request import schemas

SETTINGS = Settings(engine="null", num_step=16, max_input_chars=100)


def parse(**body: Any) -> schemas.SpeechRequest:
    return schemas.speech_request({"input": "Hello.", **body}, SETTINGS.speech)


def test_defaults_follow_openai_and_the_settings() -> None:
    r = schemas.speech_request({"input": "Hello."}, SETTINGS.speech)
    assert (r.model, r.voice, r.response_format, r.speed, r.stream_format) == (
        "omnivoice",
        "auto",
        "mp3",
        1.0,
        "audio",
    )
    assert (r.num_step, r.chunk_mode, r.seed, r.language, r.instructions, r.duration) == (
        16,
        "concurrent",
        None,
        None,
        None,
        None,
    )


def test_every_field_accepted() -> None:
    r = parse(
        model="tts-1-hd",
        voice={"id": "Alloy"},
        instructions=" male, british accent ",
        response_format="opus",
        speed=0.25,
        stream_format="sse",
        language="German",
        num_step=128,
        guidance_scale=0,
        duration=600,
        chunk_mode="sequential",
        seed=2**63 - 1,
        denoise=False,
    )
    assert (r.voice, r.instructions, r.language, r.speed, r.duration, r.denoise) == (
        "alloy",
        "male, british accent",
        "de",
        0.25,
        600.0,
        False,
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("en", "en"),
        ("EN", "en"),
        ("en-US", "en"),
        ("english", "en"),
        ("Chinese", "zh"),
        ("auto", None),
        ("", None),
        (None, None),
    ],
)
def test_languages_by_id_or_name(value: str | None, expected: str | None) -> None:
    assert parse(language=value).language == expected


@pytest.mark.parametrize(
    ("body", "param", "hint"),
    [
        ({"input": "Hi", "voices": "alloy"}, "voices", "Unrecognized"),
        ({"model": "tts-1"}, "input", "Missing"),
        ({"input": "   "}, "input", "some text"),
        ({"input": "x" * 101}, "input", "at most 100"),
        ({"input": 5}, "input", "expected a string"),
        ({"input": "Hi", "model": "whisper-1"}, "model", "one of"),
        ({"input": "Hi", "voice": ""}, "voice", "empty"),
        ({"input": "Hi", "voice": 3}, "voice", "a string or an object"),
        ({"input": "Hi", "voice": {"id": "a", "name": "b"}}, "voice", "exactly one key"),
        ({"input": "Hi", "voice": {"id": 1}}, "voice.id", "a string"),
        (
            {"input": "Hi", "response_format": "ogg"},
            "response_format",
            "mp3, opus, aac, flac, wav, pcm",
        ),
        ({"input": "Hi", "speed": 4.5}, "speed", "at most 4"),
        ({"input": "Hi", "speed": "fast"}, "speed", "expected a number"),
        ({"input": "Hi", "speed": True}, "speed", "a boolean"),
        ({"input": "Hi", "speed": float("nan")}, "speed", "at least"),
        ({"input": "Hi", "stream_format": "chunks"}, "stream_format", "audio, sse"),
        ({"input": "Hi", "language": "Klingon"}, "language", "Unknown language"),
        ({"input": "Hi", "num_step": 0}, "num_step", "between 1 and 128"),
        ({"input": "Hi", "num_step": 4.0}, "num_step", "an integer"),
        ({"input": "Hi", "guidance_scale": -1}, "guidance_scale", "at least 0"),
        ({"input": "Hi", "duration": 0}, "duration", "greater than 0"),
        ({"input": "Hi", "chunk_mode": "parallel"}, "chunk_mode", "concurrent"),
        ({"input": "Hi", "seed": -1}, "seed", "between 0"),
        ({"input": "Hi", "seed": 2**64}, "seed", "between 0"),
        ({"input": "Hi", "denoise": "yes"}, "denoise", "a boolean"),
        ({"input": "Hi", "service_tier": "scale"}, "service_tier", "auto, default, priority, flex"),
        ({"input": "Hi", "service_tier": "Flex"}, "service_tier", "one of"),
        ({"input": "Hi", "service_tier": 1}, "service_tier", "expected a string"),
        ({"input": "Hi", "service_tier": True}, "service_tier", "a boolean"),
        ({"input": "Hi", "service_tier": ["flex"]}, "service_tier", "expected a string"),
    ],
)
def test_bad_fields_are_400s_naming_the_field(body: dict[str, Any], param: str, hint: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        schemas.speech_request(body, SETTINGS.speech)
    assert (
        caught.value.status == 400 and caught.value.param == param and hint in caught.value.message
    )


def test_over_long_input_has_openais_code() -> None:
    with pytest.raises(InvalidRequest) as caught:
        parse(input="x" * 101)
    assert caught.value.code == "string_above_max_length"


def test_a_body_that_is_not_an_object() -> None:
    for body in ([], "text", 3, None):
        with pytest.raises(InvalidRequest, match="JSON object"):
            schemas.speech_request(body, SETTINGS.speech)


def test_form_strings_become_json_types() -> None:
    body = schemas.from_form(
        {
            "input": "Hi",
            "speed": "1.5",
            "num_step": "8",
            "denoise": "false",
            "seed": "",
            "language": "en",
        }
    )
    assert body == {
        "input": "Hi",
        "speed": 1.5,
        "num_step": 8,
        "denoise": False,
        "seed": None,
        "language": "en",
    }
    with pytest.raises(InvalidRequest, match="an integer") as caught:
        schemas.from_form({"num_step": "eight"})
    assert caught.value.param == "num_step"


@pytest.mark.parametrize("name", ["a", "narrator_2", "Voice-01", "x" * 64])
def test_voice_names_accepted(name: str) -> None:
    assert schemas.voice_name(name) == name


@pytest.mark.parametrize(
    "name", [None, "", "-lead", "has space", "dot.ted", "../etc", "x" * 65, "ALLOY", "auto", "é"]
)
def test_voice_names_refused(name: str | None) -> None:
    with pytest.raises(InvalidRequest) as caught:
        schemas.voice_name(name)
    assert caught.value.param == "name"


def test_openai_voices_have_designs_and_stable_seeds() -> None:
    assert set(schemas.OPENAI_VOICES) >= {
        "alloy",
        "ash",
        "ballad",
        "coral",
        "echo",
        "fable",
        "nova",
        "onyx",
        "sage",
        "shimmer",
        "verse",
    }
    assert (
        schemas.default_seed("alloy")
        == schemas.default_seed("alloy")
        != schemas.default_seed("echo")
    )
    for design in schemas.OPENAI_VOICES.values():
        assert schemas.instructions(design, "text") == design


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
FIELD_VALUES = st.dictionaries(
    st.sampled_from(sorted(schemas.SPEECH_FIELDS | {"extra"})), JSON, max_size=8
)


@settings(max_examples=400, deadline=None)
@given(st.one_of(JSON, FIELD_VALUES, FIELD_VALUES.map(lambda b: {**b, "input": "Hello there."})))
def test_any_json_is_a_request_or_a_400(body: Any) -> None:
    """The fuzz test: whatever JSON arrives, the answer is a valid request or an InvalidRequest."""
    try:
        request = schemas.speech_request(body, SETTINGS.speech)
    except InvalidRequest as exc:
        assert 400 <= exc.status < 500 and exc.message
    else:
        assert isinstance(request.input, str) and request.input.strip()


STRICT = Settings(engine="null", strict_instructions=True)


@pytest.mark.parametrize(
    ("instructions", "message"),
    [("robotic", "Valid English items"), ("male, female", "Conflicting")],
)
def test_strict_instructions_refuse_what_is_not_design_items(
    instructions: str, message: str
) -> None:
    with pytest.raises(InvalidRequest) as caught:
        schemas.speech_request({"input": "Hi", "instructions": instructions}, STRICT.speech)
    assert caught.value.param == "instructions" and message in caught.value.message
    with pytest.raises(InvalidRequest):  # /v1/audio/design asks for it whatever the setting
        schemas.speech_request(
            {"input": "Hi", "instructions": instructions}, SETTINGS.speech, strict_instructions=True
        )


@pytest.mark.parametrize(
    ("instructions", "design", "header"),
    [
        (
            "Speak in a cheerful and positive tone.",
            None,
            "used=; ignored=Speak in a cheerful and positive tone.",
        ),
        (
            "A female voice with low pitch. Speak in a cheerful tone.",
            "female, low pitch",
            "used=female,low pitch; ignored=Speak in a cheerful tone.",
        ),
        (
            "Whisper like an old man with a British accent",
            "whisper, elderly, male, british accent",
            "used=whisper,elderly,male,british accent; ignored=",
        ),
        ("male, female", "male", "used=male; ignored=female"),
        (
            "A very high pitch, 30-year-old woman",
            "very high pitch, female",
            "used=very high pitch,female; ignored=",
        ),
        (
            "女声，河南话，温柔一点",
            "女, 河南话",
            "used=%E5%A5%B3,%E6%B2%B3%E5%8D%97%E8%AF%9D; ignored=%E6%B8%A9%E6%9F%94%E4%B8%80%E7%82%B9",
        ),
    ],
)
def test_free_form_instructions_use_the_items_they_name(
    instructions: str, design: str | None, header: str
) -> None:
    """Issue 19.4: OpenAI's prose instructions were a 400; now the items named are used, the rest
    ignored, and the X-OmniVoice-Instructions header (ASCII, percent-encoded) says which."""
    r = parse(instructions=instructions)
    assert (r.instructions, r.instructions_read) == (design, header)
    assert header.isascii()


def test_design_items_as_they_are_need_no_header() -> None:
    r = parse(instructions="male, british accent")
    assert (r.instructions, r.instructions_read) == ("male, british accent", None)


@pytest.mark.parametrize(
    ("value", "tier"),
    [
        (None, Tier.INTERACTIVE),
        ("auto", Tier.INTERACTIVE),
        ("default", Tier.INTERACTIVE),
        ("priority", Tier.INTERACTIVE),
        ("flex", Tier.BULK),
    ],
)
def test_service_tier_is_openais_field_as_a_tier(value: str | None, tier: Tier) -> None:
    assert parse(service_tier=value).tier is tier
    job_default = Tier.BULK if value is None else tier  # a job item is flex unless it says
    body = {"input": "Hello.", "service_tier": value}
    assert (
        schemas.speech_request(body, SETTINGS.speech, default_tier=schemas.JOB_TIER).tier
        is job_default
    )


def test_the_unknown_field_error_lists_every_field_accepted() -> None:
    """Issue 19.9: `request_timeout_s` is accepted but was missing from the `Accepted:` list."""
    with pytest.raises(InvalidRequest) as caught:
        parse(temperature=0.7)
    accepted = caught.value.message.split("Accepted: ")[1].rstrip(".").split(", ")
    assert {"request_timeout_s", "chunk_duration", "chunk_threshold", "instructions"} <= set(
        accepted
    )
    assert (
        "speaker" not in accepted and "instruct" not in accepted
    )  # other names for ours are not listed
