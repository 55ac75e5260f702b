"""supervisor/speech/text/normalize.py: the text that reaches the model with `normalize` on, per language.

The expected strings are what a reader of each language says; the numbers are spelled by the
real num2words and cn2an. The last tests drive a real SynthesisRun through the real scheduler and
read the text of the task handed to the pool (the sidecar's input).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from supervisor.errors import InvalidRequest
from supervisor.settings import Settings
from supervisor.speech.request import schemas
from supervisor.speech.synthesis import script
from supervisor.speech.text import ssml
from supervisor.speech.text.normalize import normalize
from supervisor.speech.text.spans import Script
from tests.helpers.synthesis_driver import drive

CASES = [
    (
        "en",
        "Dr. Smith paid $12.50 on 2024-03-05 at 7:05 pm.",
        "Doctor Smith paid twelve dollars and fifty cents on March fifth, twenty twenty-four at seven oh five p m.",
    ),
    (
        "en",
        "The 21st runner ran 1,234 m at -4 °C; 20% quit, e.g. at 10:00.",
        "The twenty-first runner ran one thousand, two hundred and thirty-four meters at minus four degrees Celsius; "
        "twenty percent quit, for example at ten o'clock.",
    ),
    ("en", "It costs €1 and 3.5 kg.", "It costs one euro and three point five kilograms."),
    (
        "de",
        "Am 3. Mai 2024 um 14:30 kostete es 12,50 € für 1.234 Personen, z.B. 3,5 km bei 20 %.",
        "Am dritten Mai zweitausendvierundzwanzig um vierzehn Uhr dreißig kostete es zwölf Euro und fünfzig Cent "
        "für eintausendzweihundertvierunddreißig Personen, zum Beispiel drei Komma fünf Kilometer bei zwanzig Prozent.",
    ),
    ("de", "Der 2. Platz kostet 1 €.", "Der zweite Platz kostet ein Euro."),
    (
        "fr",
        "Le 1er mai à 14h30, M. Dupont a payé 12,50 € pour 1 234 personnes, 3,5 km, 20 %, le 2e.",
        "Le premier mai à quatorze heures trente, Monsieur Dupont a payé douze euros et cinquante centimes pour "
        "mille deux cent trente-quatre personnes, trois virgule cinq kilomètres, vingt pour cent, le deuxième.",
    ),
    ("fr", "Le 05/03/2024 à 1:00.", "Le cinq mars deux mille vingt-quatre à une heure."),
    (
        "es",
        "El 5 de marzo de 2024 a las 14:30, el Sr. García pagó 12,50 € por 1.234 personas, 3,5 km, el 1º.",
        "El cinco de marzo de dos mil veinticuatro a las catorce y treinta, el señor García pagó doce euros con "
        "cincuenta céntimos por mil doscientos treinta y cuatro personas, tres coma cinco kilómetros, el primero.",
    ),
    (
        "es",
        "El 2024-03-05 cuesta $3.",
        "El cinco de marzo de dos mil veinticuatro cuesta tres dólares.",
    ),
    (
        "zh",
        "2024-03-05 下午14:30，价格¥12.5，增长了50%，共有1234人，温度25°C，跑了3km。",
        "二零二四年三月五日 下午十四点三十分，价格十二点五元，增长了百分之五十，共有一千二百三十四人，温度二十五摄氏度，跑了三公里。",
    ),
]


@pytest.mark.parametrize(("language", "text", "spoken"), CASES)
def test_numbers_dates_times_currency_units_and_abbreviations(
    language: str, text: str, spoken: str
) -> None:
    assert normalize(text, language) == spoken


@pytest.mark.parametrize(
    "text", ["Just words, nothing else.", "Er sagte: „Guten Tag!“", "你好，世界。", "Ça va ? Oui."]
)
def test_text_that_is_already_words_is_untouched(text: str) -> None:
    assert normalize(text, None) == text


def test_no_language_guesses_chinese_for_cjk_else_english() -> None:
    assert normalize("共有3人", None) == "共有三人"
    assert normalize("3 cats", None) == "three cats"


def test_other_languages_num2words_knows_get_their_numbers_spelled() -> None:
    assert normalize("Ci sono 5 gatti.", "it") == "Ci sono cinque gatti."


def test_a_language_no_library_knows_is_left_alone() -> None:
    assert normalize("Tha 5 cait ann.", "gd") == "Tha 5 cait ann."


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("1" + "0" * 400, "en"),
        ("1" + "0" * 301, "es"),
        ("9" * 300, "ja"),
        ("1" * 400 + "%", "en"),
        ("$" + "1" * 400, "en"),
        ("1" * 400 + "st", "en"),
        ("5" * 40, "ru"),
    ],
)
def test_a_number_the_normaliser_cannot_spell_is_a_400_naming_the_input(
    text: str, language: str
) -> None:
    with pytest.raises(InvalidRequest) as raised:
        normalize(f"Count {text} now.", language)
    error = raised.value
    assert error.status == 400 and error.param == "input" and error.code == "unreadable_number"
    assert "cannot be spelled out" in error.message and len(error.message) < 200


@pytest.mark.parametrize(("digits", "language"), [("1" * 17, "zh"), ("1" * 60, "ar")])
def test_an_ordinal_no_library_can_read_is_a_400(digits: str, language: str) -> None:
    """cn2an reads 16 digits at most; num2words asserts on a long Arabic ordinal."""
    with pytest.raises(InvalidRequest) as raised:
        ssml.say_as("ordinal", digits, language)
    assert raised.value.code == "unreadable_number"


@pytest.mark.parametrize("how", ["cardinal", "ordinal", "date"])
def test_say_as_a_number_past_the_normaliser_is_a_400(how: str) -> None:
    document = f'<speak><say-as interpret-as="{how}">{"1" + "0" * 400}</say-as></speak>'
    with pytest.raises(InvalidRequest) as raised:
        schemas.speech_request({"input": document}, Settings(engine="null").speech)
    assert raised.value.code == "unreadable_number" and raised.value.param == "input"


def sent_texts(settings: Settings, **fields: Any) -> list[str]:
    return [p["text"] for p in drive({"seed": 1, **fields}, settings).payloads]


def test_the_request_field_turns_it_on_and_off_over_the_server_default() -> None:
    off, on = Settings(engine="null"), Settings(engine="null", normalize=True)
    assert sent_texts(off, input="It is 9:30.") == ["It is 9:30."]
    assert sent_texts(off, input="It is 9:30.", normalize=True, language="en") == [
        "It is nine thirty."
    ]
    assert sent_texts(on, input="Es ist 9:30.", language="de") == ["Es ist neun Uhr dreißig."]
    assert sent_texts(on, input="It is 9:30.", normalize=False) == ["It is 9:30."]


def test_normalize_must_be_a_boolean() -> None:
    with pytest.raises(schemas.InvalidRequest) as caught:
        schemas.speech_request({"input": "x", "normalize": "yes"}, Settings(engine="null").speech)
    assert caught.value.param == "normalize"


def test_a_long_input_is_normalised_while_the_event_loop_runs_on() -> None:
    """num2words spells a German number in about a millisecond: 400 of them are read in a worker
    thread, and the loop keeps running other tasks meanwhile (read in place, the reading task
    would hold it until done, and the loop below would turn once)."""
    settings = Settings(engine="null")
    numbers = " ".join(str(n) for n in range(1000, 1400))
    request = schemas.speech_request(
        {"input": numbers, "language": "de", "normalize": True}, settings.speech
    )

    async def scenario() -> tuple[int, Script]:
        reading = asyncio.ensure_future(script.read_off_loop(request, settings.speech, None))
        turns = 0
        while not reading.done():
            turns += 1
            await asyncio.sleep(0)  # one turn of the loop: the turns counted are the test
        return turns, reading.result()

    turns, read = asyncio.run(scenario())
    assert read.spans[0].text.startswith("eintausend eintausendeins") and turns > 1
