"""The SSML subset: an `input` that starts with `<speak>` read into spans.

Elements: `<break time="500ms"|strength=…/>` (silence stitched between chunks: the model cannot
make it), `<sub alias=…>`, `<say-as interpret-as="characters|cardinal|ordinal|date|telephone">`,
`<prosody rate=…>` (times the request's `speed`, nested rates too, the product kept within
0.25 to 4), `<voice name=…>` (a saved or named voice),
`<lang xml:lang=…>`. Anything else, an attribute they do not take, or a document that is not
well-formed is a 400 naming it: markup is never read aloud. defusedxml refuses DTDs and
entities, so a document cannot expand itself or read files.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, replace

import cn2an
from defusedxml import DefusedXmlException
from defusedxml.ElementTree import fromstring
from num2words import num2words

from sidecar.shared.languages import resolve_language
from supervisor.errors import InvalidRequest
from supervisor.speech.text.normalize import (
    CN2AN_DIGITS,
    UNSPELLABLE,
    language_of,
    normalize,
    spell,
    unreadable,
)
from supervisor.speech.text.spans import SPEED_RANGE, Script, Span, clamp_speed

XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
MAX_BREAK_S = 10.0
BREAK_STRENGTHS = {
    "none": 0.0,
    "x-weak": 0.1,
    "weak": 0.25,
    "medium": 0.5,
    "strong": 0.75,
    "x-strong": 1.0,
}
RATES = {"x-slow": 0.5, "slow": 0.75, "medium": 1.0, "fast": 1.25, "x-fast": 1.5, "default": 1.0}
MAX_DIGITS = 4000  # below Python's own limit on converting digits to an int (4300)
INTERPRETATIONS = ("characters", "cardinal", "ordinal", "date", "telephone")
# Each element and the attributes it takes.
ELEMENTS: dict[str, frozenset[str]] = {
    "speak": frozenset({"version", XML_LANG}),
    "break": frozenset({"time", "strength"}),
    "sub": frozenset({"alias"}),
    "say-as": frozenset({"interpret-as", "format"}),
    "prosody": frozenset({"rate"}),
    "voice": frozenset({"name"}),
    "lang": frozenset({XML_LANG}),
}


def is_ssml(text: str) -> bool:
    """An input read as SSML: one that starts with <speak>, or with an XML declaration or a
    doctype (so that such a document is refused, not read aloud)."""
    return text.lstrip().startswith(("<speak", "<?xml", "<!DOCTYPE"))


def _error(message: str) -> InvalidRequest:
    error = InvalidRequest(f"SSML: {message}", param="input")
    error.code = "invalid_ssml"
    return error


@dataclass(frozen=True)
class _Context:
    voice: str | None = None
    speed: float = 1.0
    language: str | None = None


class _Reader:
    def __init__(self, language: str | None) -> None:
        self.base = _Context(language=language)
        self.spans: list[Span] = []
        self.lead_s = 0.0
        self.text: list[str] = []
        self.context = self.base

    def add(self, text: str | None, context: _Context) -> None:
        if not text or not text.strip():
            if text and self.text:
                self.text.append(" ")
            return
        if self.text and context != self.context:
            self.flush()
        self.context = context
        self.text.append(text)

    def flush(self, pause_s: float = 0.0) -> None:
        text = re.sub(r"\s+", " ", "".join(self.text)).strip()
        self.text = []
        if text:
            c = self.context
            self.spans.append(Span(text, c.voice, c.speed, c.language, pause_s))
        elif self.spans:
            last = self.spans[-1]
            self.spans[-1] = replace(last, pause_s=last.pause_s + pause_s)
        else:
            self.lead_s += pause_s

    def element(self, node: ET.Element, context: _Context) -> None:
        tag = node.tag.rsplit("}", 1)[-1] if isinstance(node.tag, str) else str(node.tag)
        _check_attributes(tag, node)
        if tag == "break":
            if len(node) or (node.text or "").strip():
                raise _error('<break> must be empty: <break time="500ms"/>')
            self.flush(_break_s(node))
            return
        if tag in ("sub", "say-as"):
            if len(node):
                raise _error(f"<{tag}> holds text only, not other elements")
            self.add(self._spoken(tag, node, context), context)
            return
        if tag == "speak" and node is not self.root:
            raise _error("<speak> is the document itself and cannot be nested")
        context = _inner_context(tag, node, context)
        self.add(node.text, context)
        for child in node:
            self.element(child, context)
            self.add(child.tail, context)

    def _spoken(self, tag: str, node: ET.Element, context: _Context) -> str:
        text = (node.text or "").strip()
        if tag == "sub":
            if "alias" not in node.attrib:
                raise _error('<sub> needs an alias: <sub alias="World Wide Web">WWW</sub>')
            return node.attrib["alias"]
        how = node.attrib.get("interpret-as")
        if how not in INTERPRETATIONS:
            raise _error(
                f"<say-as interpret-as={how!r}> is not supported; "
                f"use one of {', '.join(INTERPRETATIONS)}"
            )
        return say_as(how, text, language_of(text, context.language))

    def read(self, document: str) -> Script:
        try:
            self.root = fromstring(document.strip())
        except DefusedXmlException:
            raise _error("a document may not declare a DTD or entities") from None
        except ET.ParseError as exc:
            raise _error(f"the document is not well-formed XML ({exc})") from None
        if self.root.tag.rsplit("}", 1)[-1] != "speak":
            raise _error("the document must be one <speak> element")
        self.element(self.root, self.base)
        self.flush()
        if not self.spans:
            raise _error("the document has no text to read")
        return Script(tuple(self.spans), self.lead_s)


def parse(document: str, language: str | None = None) -> Script:
    """An SSML document as spans; a 400 naming what is wrong with it."""
    return _Reader(language).read(document)


def _check_attributes(tag: str, node: ET.Element) -> None:
    """A 400 for an element we do not read, or an attribute it does not take."""
    allowed = ELEMENTS.get(tag)
    if allowed is None:
        raise _error(
            f"element <{tag}> is not supported; use {', '.join(f'<{t}>' for t in ELEMENTS)}"
        )
    for name in node.attrib:
        if name not in allowed and not name.startswith("{http://www.w3.org/2000/xmlns"):
            shown = "xml:lang" if name == XML_LANG else name
            takes = sorted("xml:lang" if a == XML_LANG else a for a in allowed)
            raise _error(
                f"<{tag}> does not take the attribute {shown!r}; it takes "
                f"{', '.join(takes) or 'none'}"
            )


def _inner_context(tag: str, node: ET.Element, context: _Context) -> _Context:
    """The language, voice or rate an element sets for what it holds."""
    if tag in ("lang", "speak") and XML_LANG in node.attrib:
        return replace(context, language=_language(node.attrib[XML_LANG], tag))
    if tag == "lang":
        raise _error('<lang> needs xml:lang, such as <lang xml:lang="de">')
    if tag == "voice":
        name = node.attrib.get("name", "").strip()
        if not name:
            raise _error("<voice> needs a name: a saved voice, an OpenAI voice name or 'auto'")
        return replace(context, voice=name)
    if tag == "prosody":
        # Nested rates multiply, within the model's range (four of 25 % are still 0.25).
        return replace(context, speed=clamp_speed(context.speed * _rate(node.attrib.get("rate"))))
    return context


def _break_s(node: ET.Element) -> float:
    time = node.attrib.get("time")
    if time is None:
        strength = node.attrib.get("strength", "medium")
        if strength not in BREAK_STRENGTHS:
            raise _error(f"<break strength={strength!r}>: use one of {', '.join(BREAK_STRENGTHS)}")
        return BREAK_STRENGTHS[strength]
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s)\s*", time)
    if found is None:
        raise _error(
            f"<break time={time!r}>: give milliseconds or seconds, such as '500ms' or '1.5s'"
        )
    seconds = float(found.group(1)) / (1000 if found.group(2) == "ms" else 1)
    if seconds > MAX_BREAK_S:
        raise _error(f"<break time={time!r}> is longer than the {MAX_BREAK_S:g} s allowed")
    return seconds


def _rate(rate: str | None) -> float:
    if rate is None:
        raise _error('<prosody> needs a rate, such as rate="slow" or rate="120%"')
    if rate in RATES:
        return RATES[rate]
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(%?)\s*", rate)
    value = float(found.group(1)) / (100 if found.group(2) else 1) if found else 0.0
    if not SPEED_RANGE[0] <= value <= SPEED_RANGE[1]:
        raise _error(
            f"<prosody rate={rate!r}>: use {', '.join(RATES)}, a percentage from 25% to 400%, "
            "or a factor from 0.25 to 4"
        )
    return value


def _language(value: str, tag: str) -> str:
    found = resolve_language(value) or resolve_language(value.split("-")[0])
    if found is None:
        raise _error(
            f"<{tag} xml:lang={value!r}>: unknown language; use an id such as 'en' or 'de'"
        )
    return found


def say_as(how: str, text: str, language: str) -> str:
    """What <say-as interpret-as=how> reads for a text."""
    if how == "characters":
        return " ".join(ch for ch in text if not ch.isspace())
    if how in ("cardinal", "date"):
        return normalize(text, language)
    if how == "ordinal":
        digits = text.rstrip(".ºª°").strip()
        if not digits.isdigit():
            raise _error(f'<say-as interpret-as="ordinal"> needs a whole number, not {text!r}')
        if language == "zh":
            if len(digits) > CN2AN_DIGITS:
                raise unreadable(digits, language)
            return "第" + str(cn2an.an2cn(digits))
        if len(digits) > MAX_DIGITS:
            raise unreadable(digits, language)
        try:
            return str(num2words(int(digits), lang=language, to="ordinal"))
        except NotImplementedError:
            return spell(int(digits), "en", "ordinal")
        except UNSPELLABLE:
            raise unreadable(digits, language) from None
    # telephone: digit by digit, a pause (a comma) between the groups as written
    groups = [g for g in re.split(r"[^\d+]+", text) if g]
    return ", ".join(" ".join(_digit(ch, language) for ch in group) for group in groups)


def _digit(ch: str, language: str) -> str:
    if ch == "+":
        return {"de": "plus", "fr": "plus", "es": "más", "zh": "加"}.get(language, "plus")
    if language == "zh":
        return str(cn2an.an2cn(ch))
    try:
        return str(num2words(int(ch), lang=language))
    except UNSPELLABLE:
        return ch
