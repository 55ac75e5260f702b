"""supervisor/speech/synthesis/cost.py: a request's cost counted on what the model will read, and the limits
on it. The property test generates SSML (breaks, nested rates, say-as, sub), dialogue scripts,
lexicons and numbers, runs each through the real reader, SynthesisRun and scheduler, answers every
task as the sidecar does (the duration rule's frames of audio, read against the continuity
prompt it was given, padded), and asserts the invariant: a
request is either refused with a 4xx, or its admitted cost bounds the audio it produces and what
an answer can hold."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sidecar.shared.duration import FRAME_RATE, target_tokens
from supervisor.errors import InvalidRequest, ServerError
from supervisor.settings import Settings
from supervisor.speech.request import schemas
from supervisor.speech.request.voice import Voice
from supervisor.speech.stores.lexicons import Lexicon
from supervisor.speech.synthesis import cost, script
from supervisor.speech.synthesis.runner import SynthesisRun
from supervisor.speech.text.spans import SPEED_RANGE
from supervisor.supervision.scheduler import Scheduler

RATE = 24000
SAMPLES_PER_FRAME = RATE // FRAME_RATE
SETTINGS = Settings(engine="null", max_input_chars=600, max_request_audio_s=90.0, chunk_s=5.0)
# What a refusal on the way in may be: each a 4xx naming what to change.
REFUSALS = {
    "input_too_long",
    "audio_too_long",
    "unreadable_number",
    "invalid_ssml",
    "string_above_max_length",
    "invalid_request",
}


def read(body: dict[str, Any], lexicon: Lexicon | None = None, capacity: int = 1) -> SynthesisRun:
    """The request admitted into an empty scheduler (or the 4xx it is refused with)."""
    scheduler = Scheduler(SETTINGS.scheduling)
    scheduler.capacity = capacity
    request = schemas.speech_request(body, SETTINGS.speech)
    text = script.read(request, SETTINGS.speech, lexicon)
    return SynthesisRun(
        scheduler, request, Voice(), SETTINGS.speech, voices=lambda _: Voice(), text=text
    )


def produce(synthesis: SynthesisRun) -> int:
    """Run it to the end, each task answered with the frames the duration rule gives its text
    (as the sidecar generates them); the bytes of audio it hands on, silence included."""

    async def scenario() -> int:
        scheduler = synthesis.scheduler
        total = 0

        async def consume() -> None:
            nonlocal total
            async for piece in synthesis.pieces():
                total += len(piece.audio)

        consumer = asyncio.ensure_future(consume())
        while not consumer.done():
            await asyncio.sleep(0)  # a turn of the loop: the synthesis runs, then this sidecar
            batch = scheduler.next_batch()
            for task in batch.tasks if batch else []:
                item = task.payload
                voice = item.get("voice")  # a continuity prompt: the rule reads its rate
                frames = (
                    int(item["duration"] * FRAME_RATE)
                    if item.get("duration")
                    else target_tokens(
                        item["text"],
                        voice["ref_text"] if voice else None,
                        voice["tokens"]["shape"][1] if voice else None,
                        speed=item.get("speed"),
                    )
                )
                assert SPEED_RANGE[0] <= item.get("speed", 1.0) <= SPEED_RANGE[1]
                padding = round(cost.CHUNK_PAD_S * RATE)  # the sidecar's zeros at both ends
                audio = bytes(2 * (frames * SAMPLES_PER_FRAME + padding))
                tokens = [{"shape": [1, frames], "data": bytes(2 * frames)}]
                scheduler.resolve(
                    task,
                    {
                        "op": "result",
                        "id": task.id,
                        "audio": audio,
                        "sample_rate": RATE,
                        "seed": item["seed"],
                        "tokens": tokens if item.get("return_tokens") else [],
                        "timings": {},
                    },
                )
        await consumer
        return total

    return asyncio.run(scenario())


def refused(body: dict[str, Any], lexicon: Lexicon | None = None) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as raised:
        read(body, lexicon)
    return raised.value


# ---------------------------------------------------------------- the findings, in-process


def test_silence_counts_a_break_heavy_request_is_refused() -> None:
    """210 breaks of 10 s (once a 201 MB WAV at 48 kHz) are 2,100 s of silence: refused."""
    body = {
        "input": "<speak>a" + '<break time="10s"/>' * 30 + "</speak>",
        "sample_rate": 48000,
        "response_format": "wav",
    }
    error = refused(body)
    assert error.status == 400 and error.code == "audio_too_long"
    assert "300 s of pauses" in error.message


def test_nested_rates_stop_at_the_slowest_speed() -> None:
    """Four nested 25 % under speed 0.25 read at 0.25, not 0.0039: seconds, not minutes."""
    nested = '<prosody rate="25%">' * 4 + "word" + "</prosody>" * 4
    synthesis = read({"input": f"<speak>{nested}</speak>", "speed": 0.25})
    assert synthesis.parts[0].speed == SPEED_RANGE[0]
    assert synthesis.cost.audio_s < 10
    fast = '<prosody rate="400%">' * 3 + "word" + "</prosody>" * 3
    assert read({"input": f"<speak>{fast}</speak>", "speed": 4}).parts[0].speed == SPEED_RANGE[1]


def test_a_lexicon_expansion_is_counted_after_it_is_applied() -> None:
    lexicon = Lexicon("long", "en", {"a": "x" * 200}, 0)
    error = refused({"input": "a " * 300}, lexicon)
    assert error.code == "input_too_long" and "60300 characters" in error.message
    assert read({"input": "a b"}, lexicon).cost.chars == 202


def test_telephone_expansion_is_counted() -> None:
    digits = "5" * 500
    error = refused({"input": f'<speak><say-as interpret-as="telephone">{digits}</say-as></speak>'})
    assert error.code == "input_too_long"  # 500 digits read as 2,499 characters of words


def test_a_request_larger_than_the_whole_queue_is_refused_not_admitted_whole() -> None:
    small_queue = Settings(engine="null", max_queue_audio_s=20.0, chunk_s=5.0)
    request = schemas.speech_request({"input": "The harbour was quiet. " * 20}, small_queue.speech)
    scheduler = Scheduler(small_queue.scheduling)
    with pytest.raises(InvalidRequest) as raised:
        SynthesisRun(scheduler, request, Voice(), small_queue.speech)
    assert (
        raised.value.code == "audio_too_long" and "admission limit (20 s)" in raised.value.message
    )
    assert scheduler.admitted_audio_s == 0 and not scheduler.reservations


def test_pauses_are_admitted_with_the_speech() -> None:
    body = {"input": '<speak>One.<break time="10s"/>Two.<break time="5s"/>Three.</speak>'}
    synthesis = read(body)
    assert synthesis.cost.silence_s == 15.0
    assert synthesis.scheduler.admitted_audio_s == pytest.approx(synthesis.cost.audio_s)
    produced_s = produce(synthesis) / 2 / RATE
    assert produced_s == pytest.approx(synthesis.cost.audio_s, abs=0.01)
    assert synthesis.scheduler.admitted_audio_s == 0  # all given back


def test_dialogue_pauses_count() -> None:
    turns = "\n".join(f"[alloy] Line {i}." for i in range(12))
    error = refused({"input": turns, "dialogue": True, "pause_ms": 10_000})
    assert error.code == "audio_too_long" and "110 s of pauses" in error.message


def test_the_memory_bound_of_an_answer() -> None:
    """600 s (and one chunk's padding) at 48 kHz in 16-bit samples: what RELIABILITY states."""
    longest = Settings(engine="null").max_request_audio_s + cost.CHUNK_PAD_S
    assert cost.answer_bytes(longest) == 57_619_200


def test_the_longest_duration_is_one_request() -> None:
    """`duration` 600, the field's own maximum, is within the bound (its padding allowed)."""
    defaults = Settings(engine="null", chunk_s=5.0)
    request = schemas.speech_request({"input": "Hello there.", "duration": 600.0}, defaults.speech)
    synthesis = SynthesisRun(Scheduler(defaults.scheduling), request, Voice(), defaults.speech)
    assert synthesis.cost.audio_s == pytest.approx(600.2)
    refused_body = {"input": "<speak>Hello there.<break time='1s'/>Again.</speak>", "duration": 1}
    assert refused(refused_body).param == "duration"  # one text read one way, as before


# ---------------------------------------------------------------- the property

WORDS = st.sampled_from(
    [
        "one",
        "two",
        "harbour",
        "quiet",
        "a",
        "Mr.",
        "3",
        "42",
        "1999",
        "$5",
        "10 km",
        "50%",
        "3rd",
        "9" * 40,
        "1" + "0" * 310,
    ]
)


def _text() -> st.SearchStrategy[str]:
    return st.lists(WORDS, min_size=1, max_size=6).map(" ".join)


def _leaf() -> st.SearchStrategy[str]:
    digits = st.text("0123456789", min_size=1, max_size=30)
    return st.one_of(
        _text(),
        st.builds(lambda v, u: f'<break time="{v}{u}"/>', st.integers(0, 10), st.just("s")),
        st.builds(lambda v: f'<break time="{v}ms"/>', st.integers(0, 10_000)),
        st.sampled_from(["weak", "x-strong"]).map(lambda s: f'<break strength="{s}"/>'),
        st.builds(
            lambda how, d: f'<say-as interpret-as="{how}">{d}</say-as>',
            st.sampled_from(["cardinal", "ordinal", "telephone", "characters"]),
            digits,
        ),
        _text().map(lambda t: f'<sub alias="{t}">x</sub>'),
    )


def _ssml() -> st.SearchStrategy[str]:
    rates = st.sampled_from(["x-slow", "slow", "fast", "x-fast", "25%", "400%", "0.25", "4"])
    tree = st.recursive(
        _leaf(),
        lambda inner: st.builds(
            lambda rate, parts: f'<prosody rate="{rate}">{" ".join(parts)}</prosody>',
            rates,
            st.lists(inner, min_size=1, max_size=3),
        ),
        max_leaves=12,
    )
    return st.lists(tree, min_size=1, max_size=5).map(lambda p: f"<speak>{' '.join(p)}</speak>")


def _dialogue() -> st.SearchStrategy[str]:
    return st.lists(_text().map(lambda t: f"[alloy] {t}"), min_size=1, max_size=8).map("\n".join)


BODIES = st.one_of(
    st.fixed_dictionaries(
        {"input": _ssml()},
        optional={
            "speed": st.sampled_from([0.25, 0.5, 1.0, 4.0]),
            "normalize": st.booleans(),
            "sample_rate": st.sampled_from([8000, 48000]),
            "language": st.sampled_from(["en", "de", "es", "zh", "ar", "ru"]),
        },
    ),
    st.fixed_dictionaries(
        {"input": _dialogue(), "dialogue": st.just(True), "pause_ms": st.integers(0, 10_000)},
        optional={"speed": st.sampled_from([0.25, 1.0]), "normalize": st.booleans()},
    ),
    st.fixed_dictionaries(
        {"input": _text()},
        optional={
            "speed": st.sampled_from([0.25, 1.0]),
            "normalize": st.booleans(),
            "duration": st.sampled_from([1.0, 600.0]),
        },
    ),
)
LEXICONS = st.none() | st.dictionaries(
    st.sampled_from(["one", "two", "harbour", "a", "x"]),
    st.text("abc ", min_size=1, max_size=200).filter(str.strip),
    max_size=3,
).map(lambda entries: Lexicon("generated", "en", entries, 0) if entries else None)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=BODIES, lexicon=LEXICONS)
def test_the_admitted_cost_bounds_the_audio_and_the_answer(
    body: dict[str, Any], lexicon: Lexicon | None
) -> None:
    try:
        synthesis = read(body, lexicon)
    except InvalidRequest as error:  # refused on the way in: a 4xx that names what is wrong
        assert 400 <= error.status < 500 and error.code in REFUSALS, error.code
        assert error.param is not None
        return
    except ServerError as error:  # nothing else may come of a request's text
        raise AssertionError(f"{type(error).__name__}: {error.message}") from None
    admitted = synthesis.cost
    assert admitted.audio_s <= SETTINGS.max_request_audio_s + cost.CHUNK_PAD_S
    assert admitted.chars <= cost.EXPANSION * SETTINGS.max_input_chars
    assert synthesis.scheduler.admitted_audio_s == pytest.approx(admitted.audio_s)
    produced = produce(synthesis)
    # The audio made is the audio admitted (to a sample per pause), and so is what an answer holds.
    assert produced / 2 / RATE <= admitted.audio_s + 0.001 * (1 + len(synthesis.chunks))
    bound = cost.answer_bytes(SETTINGS.max_request_audio_s + cost.CHUNK_PAD_S)
    assert produced * 48000 // RATE <= bound + 96
