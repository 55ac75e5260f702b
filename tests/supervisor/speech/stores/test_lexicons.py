"""supervisor/speech/stores/lexicons.py: entries replace whole words, before normalisation; the store keeps
them on disk; a bad lexicon is a 400 naming the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from supervisor.errors import InvalidRequest, NotFound
from supervisor.settings import Settings
from supervisor.speech.request.voice import Voice
from supervisor.speech.stores.lexicons import Lexicon, LexiconStore, parse
from tests.helpers.synthesis_driver import drive

BRANDS = Lexicon(
    "brands",
    "en",
    {
        "SQL": "sequel",
        "Dr.": "Drive",
        "2024": "twenty-four",
        "OmniVoice": "omni voice",
        "北京": "Beijing",
    },
    0,
)


def texts(body: dict[str, Any], lexicon: Lexicon | None = BRANDS) -> list[str]:
    settings = Settings(engine="null")
    return [p["text"] for p in drive({"seed": 1, **body}, settings, lexicon=lexicon).payloads]


def test_entries_replace_whole_words_only_once() -> None:
    assert (
        BRANDS.apply("SQL, NoSQL and SQLite on OmniVoices; OmniVoice.")
        == "sequel, NoSQL and SQLite on OmniVoices; omni voice."
    )
    assert (
        Lexicon("x", "en", {"a": "b", "b": "c"}, 0).apply("a b") == "b c"
    )  # one pass: "b" from "a" stays
    assert BRANDS.apply("在北京") == "在Beijing"  # a CJK entry needs no spaces around it


def test_the_lexicon_comes_before_normalisation() -> None:
    body = {"input": "Dr. Lee, 12 Dr. Way, in 2024 at 9:30.", "language": "en", "normalize": True}
    assert texts(body) == ["Drive Lee, twelve Drive Way, in twenty-four at nine thirty."]
    assert texts(body, lexicon=None) == [
        "Doctor Lee, twelve Doctor Way, in two thousand and twenty-four at nine thirty."
    ]


def test_it_applies_to_spans_in_its_language_or_none() -> None:
    document = '<speak>SQL <lang xml:lang="de">SQL</lang></speak>'
    assert texts({"input": document, "language": "en"}) == ["sequel", "SQL"]
    assert texts({"input": "SQL"}) == ["sequel"]  # no language given: it applies


def test_a_lexicon_for_a_voice_applies_only_to_the_spans_read_in_it() -> None:
    names = parse("names", {"language": "en", "voice": "Onyx", "entries": {"Bob": "Robert"}})
    assert names.voice == "onyx" and names.public()["voice"] == "onyx"  # as a request's voice
    voices = {"alloy": Voice(instruct="female"), "onyx": Voice(instruct="male")}
    script = {"input": "[alloy] Hi Bob.\n[onyx] I am Bob.", "dialogue": True}
    run = drive(
        {"seed": 1, **script}, Settings(engine="null"), lexicon=names, voices=voices.__getitem__
    )
    assert sorted(p["text"] for p in run.payloads) == ["Hi Bob.", "I am Robert."]
    assert texts({"input": "Bob.", "voice": "onyx"}, lexicon=names) == ["Robert."]
    assert texts({"input": "Bob.", "voice": "alloy"}, lexicon=names) == ["Bob."]
    everyone = parse("names", {"language": "en", "entries": {"Bob": "Robert"}})
    assert everyone.voice is None and texts({"input": "Bob.", "voice": "alloy"}, everyone) == [
        "Robert."
    ]


def test_the_store_keeps_lexicons_on_disk(tmp_path: Path) -> None:
    store = LexiconStore(tmp_path / "lexicons")
    assert (
        store.put(parse("brands", {"language": "English", "entries": {"SQL": "sequel"}})) is False
    )
    again = LexiconStore(tmp_path / "lexicons")
    assert again.get("brands") == store.get("brands") and again.get("brands").language == "en"  # type: ignore[union-attr]
    replacing = parse("brands", {"language": "en", "voice": "nova", "entries": {"GUI": "gooey"}})
    assert store.put(replacing) is True
    replaced = LexiconStore(tmp_path / "lexicons").get("brands")
    assert replaced is not None and (replaced.entries, replaced.voice) == ({"GUI": "gooey"}, "nova")
    store.delete("brands")
    assert LexiconStore(tmp_path / "lexicons").get("brands") is None and not list(
        (tmp_path / "lexicons").iterdir()
    )
    with pytest.raises(NotFound):
        store.delete("brands")


@pytest.mark.parametrize(
    ("name", "body", "param"),
    [
        ("bad name!", {"language": "en", "entries": {}}, "name"),
        ("x", {"entries": {}}, "language"),
        ("x", {"language": "xx-nonsense", "entries": {}}, "language"),
        ("x", {"language": "en"}, "entries"),
        ("x", {"language": "en", "entries": ["SQL"]}, "entries"),
        ("x", {"language": "en", "entries": {"SQL": 3}}, "entries"),
        ("x", {"language": "en", "entries": {" SQL": "sequel"}}, "entries"),
        ("x", {"language": "en", "entries": {"SQL": ""}}, "entries"),
        ("x", {"language": "en", "entries": {}, "speaker": "alloy"}, "speaker"),
        ("x", {"language": "en", "entries": {}, "voice": " "}, "voice"),
        ("x", {"language": "en", "entries": {}, "voice": 3}, "voice"),
    ],
)
def test_a_bad_lexicon_is_a_400_naming_the_field(
    name: str, body: dict[str, Any], param: str
) -> None:
    with pytest.raises(InvalidRequest) as caught:
        parse(name, body)
    assert caught.value.param == param and caught.value.status == 400


def test_a_bad_lexicon_name_is_said_to_be_a_lexicon_name() -> None:
    """Issue 48 (low): `PUT /v1/audio/lexicons/a.b` said "Invalid voice name"."""
    with pytest.raises(InvalidRequest) as caught:
        parse("a.b", {"language": "en", "entries": {}})
    assert caught.value.message.startswith("Invalid lexicon name 'a.b'")
    assert caught.value.param == "name"
    assert parse("alloy", {"language": "en", "entries": {}}).name == "alloy"  # not a voice
