"""Numbers, ordinals, dates, times, currency, units and abbreviations spelled out as words.

Opt-in (`normalize: true`, or `--normalize` for every request), as upstream OmniVoice's own
`normalize_text` is. Upstream uses WeTextProcessing (zh, en; it needs the compiled pynini) and
num2words for bare integers in other languages; here num2words spells the numbers of English,
German, French and Spanish (and the bare numbers of every other language it knows), and cn2an
those of Chinese, both pure Python. The rules run in this order, each on what the one before
left as digits: abbreviations, dates, times, currency, units and percentages, ordinals, then
any number left. Text that is already words passes through untouched.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import Decimal, InvalidOperation

import cn2an
from num2words import CONVERTER_CLASSES, num2words

from sidecar.shared.text import contains_cjk
from supervisor.errors import InvalidRequest
from supervisor.speech.text.normalize_rules import (
    CURRENCY_CODES,
    CURRENCY_SYMBOLS,
    RULES,
    ZH_CURRENCIES,
    ZH_UNITS,
    Rules,
)

CN2AN_DIGITS = 16
_ORDINAL_SUFFIX = {
    "en": r"(?:st|nd|rd|th)",
    "fr": r"(?:er|re|ère|e|ème|eme)",
    "es": r"(?:\.?[ºª°])",
}
# German: "am 3. Mai", "der 2. Platz": an ordinal after an article, its ending from the case.
_DE_ARTICLES = {
    "der": "",
    "die": "",
    "das": "",
    "den": "n",
    "dem": "n",
    "des": "n",
    "am": "n",
    "im": "n",
    "zum": "n",
    "vom": "n",
    "beim": "n",
}
_SYMBOLS = "|".join(re.escape(s) for s in sorted(CURRENCY_SYMBOLS, key=len, reverse=True))
_CODES = "|".join(CURRENCY_CODES)
_ZH_MONEY = {"¥": "元", "￥": "元"}  # in Chinese text the yen sign is the yuan


def language_of(text: str, language: str | None) -> str:
    """The language to normalise in: the request's, else Chinese for CJK text, else English."""
    if language:
        return language
    return "zh" if contains_cjk(text) else "en"


def normalize(text: str, language: str | None) -> str:
    """The text with what the model would misread spelled out in `language` (None: guessed).
    A language neither num2words nor cn2an knows comes back unchanged."""
    lang = language_of(text, language)
    if lang == "zh":
        return _chinese(text)
    rules = RULES.get(lang)
    if rules is None:
        return _numbers(text, lang, ".", ",") if lang in CONVERTER_CLASSES else text
    return _Normalizer(lang, rules).run(text)


# What num2words raises for a number it cannot spell: past its largest name (10^306 in English,
# less in some languages), or a form its language lacks (Arabic ordinals assert). `spell` makes
# them a 400; SSML's `say-as` (ssml.py), which calls num2words itself, catches them too.
UNSPELLABLE = (
    ArithmeticError,
    KeyError,
    IndexError,
    ValueError,
    NotImplementedError,
    AssertionError,
)


def unreadable(number: object, lang: str) -> InvalidRequest:
    """The 400 for a number the normaliser cannot read aloud (the `param` is the request's text)."""
    shown = str(number)
    shown = shown if len(shown) <= 24 else f"{shown[:12]}…({len(shown)} characters)"
    error = InvalidRequest(
        f"the number {shown} cannot be spelled out in {lang!r}; write it in words, or in "
        "smaller parts",
        param="input",
    )
    error.code = "unreadable_number"
    return error


def spell(value: Decimal | int | str, lang: str, to: str = "cardinal") -> str:
    """num2words (a string: its digits), with a number it cannot read a 400 rather than whatever
    it raises."""
    try:
        return str(num2words(int(value) if isinstance(value, str) else value, lang=lang, to=to))
    except UNSPELLABLE:
        raise unreadable(value, lang) from None


def _parse(digits: str, decimal: str, group: str) -> Decimal | None:
    """A written number ("1,234.5" in English, "1.234,5" in German) as a Decimal."""
    plain = "".join(ch for ch in digits if ch not in group).replace(decimal, ".")
    try:
        return Decimal(plain)
    except InvalidOperation:
        return None


def _number_pattern(decimal: str, group: str) -> str:
    groups = "[" + re.escape(group) + "]"
    point = re.escape(decimal)
    return rf"\d{{1,3}}(?:{groups}\d{{3}})+(?:{point}\d+)?|\d+(?:[{point}.]\d+)?"


def _numbers(text: str, lang: str, decimal: str, group: str, minus: str = "minus") -> str:
    def say(m: re.Match[str]) -> str:
        value = _parse(m.group(2), decimal, group) if m.group(2).count(decimal) <= 1 else None
        if value is None:
            value = _parse(m.group(2), ".", "")
        if value is None:
            return m.group(0)
        sign = minus + " " if m.group(1) else ""
        said = spell(value, lang)
        if lang == "es" and decimal in m.group(2):
            said = said.replace(" punto ", " coma ")  # "3,5": Spain reads the comma it wrote
        return sign + said

    return re.sub(
        rf"(?<![\w.,])([-−](?=\d))?({_number_pattern(decimal, group)})(?![\w])", say, text
    )


class _Normalizer:
    def __init__(self, lang: str, rules: Rules) -> None:
        self.lang = lang
        self.rules = rules
        self.number = _number_pattern(rules.decimal, rules.group)

    def run(self, text: str) -> str:
        steps: list[Callable[[str], str]] = [
            self.abbreviations,
            self.dates,
            self.times,
            self.currency,
            self.units,
            self.ordinals,
        ]
        for step in steps:
            text = step(text)
        return _numbers(text, self.lang, self.rules.decimal, self.rules.group, self.rules.minus)

    def value(self, digits: str) -> Decimal | None:
        return _parse(digits, self.rules.decimal, self.rules.group)

    def count(self, value: Decimal, singular: str, plural: str) -> str:
        """A number of things: "one euro", "zwei Euro"."""
        if value == 1:
            return f"{self.rules.one} {singular}"
        return f"{spell(value, self.lang)} {plural}"

    # ------------------------------------------------------------------ rules

    def abbreviations(self, text: str) -> str:
        for short, long in self.rules.abbreviations.items():
            text = re.sub(rf"(?<!\w){re.escape(short)}(?!\w)", long, text)
        return text

    def day(self, day: int, article: str = "") -> str:
        if self.lang == "en":
            return spell(day, "en", "ordinal")
        if self.lang == "de":
            return spell(day, "de", "ordinal") + (article or "r")
        if self.lang == "fr" and day == 1:
            return "premier"
        return spell(day, self.lang)

    def year(self, year: int) -> str:
        return spell(year, self.lang, "year" if self.lang == "en" else "cardinal")

    def date(self, year: int, month: int, day: int) -> str | None:
        if not (1 <= month <= 12 and 1 <= day <= 31):
            return None
        name = self.rules.months[month - 1]
        if self.lang == "en":
            return f"{name} {self.day(day)}, {self.year(year)}"
        if self.lang == "de":
            return f"{self.day(day)} {name} {self.year(year)}"
        if self.lang == "es":
            return f"{self.day(day)} de {name} de {self.year(year)}"
        return f"{self.day(day)} {name} {self.year(year)}"

    def dates(self, text: str) -> str:
        def iso(m: re.Match[str]) -> str:
            return self.date(int(m.group(1)), int(m.group(2)), int(m.group(3))) or m.group(0)

        def numeric(m: re.Match[str]) -> str:
            a, b, year = int(m.group(1)), int(m.group(2)), int(m.group(3))
            month, day = (a, b) if self.lang == "en" else (b, a)  # 03/05/2024 is March in the US
            return self.date(year, month, day) or m.group(0)

        text = re.sub(r"\b(\d{4})-(\d{2})-(\d{2})\b", iso, text)
        text = re.sub(r"\b(\d{1,2})[./](\d{1,2})[./](\d{4})\b", numeric, text)
        months = "|".join(self.rules.months)
        if self.lang == "en":  # "March 5" reads "March fifth"
            text = re.sub(
                rf"\b({months}) (\d{{1,2}})(?:st|nd|rd|th)?\b(?!:)",
                lambda m: f"{m.group(1)} {self.day(int(m.group(2)))}",
                text,
            )
        if self.lang == "de":  # "am 3. Mai" reads "am dritten Mai"

            def german(m: re.Match[str]) -> str:
                ending = _DE_ARTICLES.get((m.group(1) or "").strip().lower(), "")
                return f"{m.group(1) or ''}{self.day(int(m.group(2)), ending)} {m.group(3)}"

            text = re.sub(rf"(\b\w+ )?\b(\d{{1,2}})\. ({months})\b", german, text)
        return text

    def times(self, text: str) -> str:
        def say(m: re.Match[str]) -> str:
            hours, minutes, meridiem = int(m.group(1)), int(m.group(2)), (m.group(3) or "").strip()
            h, mm = spell(hours, self.lang), spell(minutes, self.lang)
            if self.lang == "en":
                said = h + (
                    " o'clock"
                    if not minutes and not meridiem
                    else ""
                    if not minutes
                    else f" oh {mm}"
                    if minutes < 10
                    else f" {mm}"
                )
                return said + (f" {meridiem.lower().replace('.', '')[0]} m" if meridiem else "")
            one, many = self.rules.hour
            if self.lang == "fr" and hours == 1:
                h = "une"
            if self.lang == "es":
                return f"{h} y {mm}" if minutes else f"{h} en punto"
            hour = one if hours == 1 else many
            return f"{h} {hour}" + (f" {mm}" if minutes else "")

        separator = "[:h]" if self.lang == "fr" else ":"
        meridiem = r"(\s?(?:[aApP]\.[mM]\.|[aApP][mM]\b))?" if self.lang == "en" else "()"
        return re.sub(rf"\b([01]?\d|2[0-3]){separator}([0-5]\d)\b{meridiem}", say, text)

    def money(self, code: str, digits: str) -> str | None:
        value = self.value(digits)
        if value is None:
            return None
        major, majors, minor, minors = self.rules.currencies[code]
        whole = int(value)
        cents = int((value - whole) * 100)
        said = self.count(Decimal(whole), major, majors)
        if cents and minor:
            said += f" {self.rules.currency_and} {self.count(Decimal(cents), minor, minors)}"
        return said

    def currency(self, text: str) -> str:
        def before(m: re.Match[str]) -> str:
            sign = m.group(1).strip()
            return self.money(CURRENCY_SYMBOLS.get(sign, sign), m.group(2)) or m.group(0)

        def after(m: re.Match[str]) -> str:
            code = CURRENCY_SYMBOLS.get(m.group(2), m.group(2))
            return self.money(code, m.group(1)) or m.group(0)

        text = re.sub(rf"({_SYMBOLS}|\b(?:{_CODES}) ?)\s?({self.number})\b", before, text)
        return re.sub(rf"\b({self.number})\s?({_SYMBOLS}|(?:{_CODES})\b)", after, text)

    def units(self, text: str) -> str:
        symbols = "|".join(re.escape(s) for s in sorted(self.rules.units, key=len, reverse=True))

        def say(m: re.Match[str]) -> str:
            value = self.value(m.group(2))
            if value is None:
                return m.group(0)
            sign = self.rules.minus + " " if m.group(1) else ""
            singular, plural = self.rules.units[m.group(3)]
            if value == 1 and m.group(3) != "%":
                return f"{sign}{self.rules.one} {singular}"
            spoken = _numbers(m.group(2), self.lang, self.rules.decimal, self.rules.group)
            return f"{sign}{spoken} {plural}"

        return re.sub(rf"(?<![\w.,])([-−])?({self.number}) ?({symbols})(?![\w/])", say, text)

    def ordinals(self, text: str) -> str:
        if self.lang == "de":

            def german(m: re.Match[str]) -> str:
                ending = _DE_ARTICLES[m.group(1).lower()]
                return f"{m.group(1)} {spell(m.group(2), 'de', 'ordinal')}{ending} "

            articles = "|".join(_DE_ARTICLES)
            return re.sub(rf"\b({articles}) (\d+)\. (?=\w)", german, text, flags=re.IGNORECASE)
        suffix = _ORDINAL_SUFFIX.get(self.lang)
        if suffix is None:
            return text
        return re.sub(
            rf"\b(\d+){suffix}(?!\w)", lambda m: spell(m.group(1), self.lang, "ordinal"), text
        )


def _chinese(text: str) -> str:
    """Chinese: dates, times, currency and units to what cn2an reads, then cn2an's an2cn."""
    # cn2an reads at most 16 digits (past that it warns and cuts or skips the number).
    longest = max(re.findall(r"\d+", text), key=len, default="")
    if len(longest) > CN2AN_DIGITS:
        raise unreadable(longest, "zh")
    text = re.sub(r"(?<!\d)(\d{4})-(\d{1,2})-(\d{1,2})(?!\d)", r"\1年\2月\3日", text)
    text = re.sub(
        r"(?<!\d)([01]?\d|2[0-3]):([0-5]\d)(?!\d)",
        lambda m: f"{m.group(1)}点" + (f"{int(m.group(2))}分" if int(m.group(2)) else "整"),
        text,
    )
    text = re.sub(
        rf"({_SYMBOLS})\s?(\d+(?:\.\d+)?)",
        lambda m: (
            m.group(2) + _ZH_MONEY.get(m.group(1), ZH_CURRENCIES[CURRENCY_SYMBOLS[m.group(1)]])
        ),
        text,
    )
    units = "|".join(re.escape(s) for s in sorted(ZH_UNITS, key=len, reverse=True))
    text = re.sub(
        rf"(\d)\s?({units})(?![A-Za-z/])", lambda m: m.group(1) + ZH_UNITS[m.group(2)], text
    )
    return str(cn2an.transform(text, "an2cn"))
