"""A chapter's text from its XHTML, read with lxml's HTML parser (lenient, no entities but
HTML's own, nothing fetched).

Blocks (headings, paragraphs, list items, quotations, table cells) become paragraphs, separated
by blank lines; a heading without closing punctuation gets a full stop, so it is read as a
sentence of its own. Dropped: scripts, styles, images, SVG, MathML, footnote and endnote markers
(`epub:type="noteref"`, `role="doc-noteref"`, a `<sup>` holding a link) and the notes themselves
(`<aside>` or any element typed or roled as a footnote, endnote or note), which belong beside
the text, not in it.
"""

from __future__ import annotations

import re
from typing import Any

from lxml import etree, html

DROPPED_TAGS = frozenset(
    {"script", "style", "img", "svg", "math", "head", "title", "object", "video", "audio", "iframe"}
)
NOTE_TYPES = frozenset(
    {"noteref", "footnote", "endnote", "endnotes", "footnotes", "rearnote", "rearnotes", "note"}
)
NOTE_ROLES = frozenset({"doc-noteref", "doc-footnote", "doc-endnote", "doc-endnotes"})
BLOCK_TAGS = frozenset(
    {
        "p",
        "div",
        "section",
        "article",
        "blockquote",
        "li",
        "dt",
        "dd",
        "pre",
        "td",
        "th",
        "tr",
        "figcaption",
        "caption",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "header",
        "footer",
        "ol",
        "ul",
        "dl",
        "table",
        "body",
        "br",
        "hr",
    }
)
HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
SPACE = re.compile(r"\s+")
CLOSED = (".", "!", "?", ":", ";", "…", "。", "！", "？", '"', "”", "’", "»")


def _local(tag: Any) -> str:
    return tag.rsplit("}", 1)[-1].lower() if isinstance(tag, str) else ""


def _is_note(element: Any) -> bool:
    """A footnote or endnote, or the marker that points at one."""
    for key, value in element.attrib.items():
        name = key.rsplit("}", 1)[-1].lower()
        if (
            name in ("epub:type", "type")
            and key != "type"
            and set(value.lower().split()) & NOTE_TYPES
        ):
            return True
        if name == "role" and value.lower() in NOTE_ROLES:
            return True
    tag = _local(element.tag)
    # an aside is a note or a sidebar; a bare marker: <sup><a href="#fn1">1</a></sup>
    return tag == "aside" or (tag == "sup" and any(_local(child.tag) == "a" for child in element))


class _Blocks:
    def __init__(self) -> None:
        self.blocks: list[str] = []
        self.current: list[str] = []
        self.heading = False

    def text(self, value: str | None) -> None:
        if value:
            self.current.append(value)

    def end(self) -> None:
        text = SPACE.sub(" ", "".join(self.current)).strip()
        self.current = []
        if text:
            if self.heading and not text.endswith(CLOSED):
                text += "."
            self.blocks.append(text)
        self.heading = False

    def walk(self, element: Any) -> None:
        tag = _local(element.tag)
        if tag in DROPPED_TAGS or _is_note(element):
            self.text(element.tail)  # the text after a dropped element is still the text
            return
        block = tag in BLOCK_TAGS
        if block:
            self.end()
            self.heading = tag in HEADINGS
        self.text(element.text)
        for child in element:
            if isinstance(child.tag, str):
                self.walk(child)
            else:
                self.text(child.tail)  # a comment or processing instruction: only its tail
        if block:
            self.end()
        self.text(element.tail)


def text_of(data: bytes) -> tuple[str, str | None]:
    """The document's text (paragraphs separated by blank lines) and its first heading."""
    if not data.strip():
        return "", None
    try:
        root = html.document_fromstring(data, parser=html.HTMLParser(no_network=True))
    except (etree.ParserError, ValueError):
        return "", None
    body = root.find(".//body")
    blocks = _Blocks()
    blocks.walk(body if body is not None else root)
    blocks.end()
    heading = None
    for element in root.iter(*HEADINGS):
        heading = SPACE.sub(" ", element.text_content()).strip() or None
        if heading:
            break
    return "\n\n".join(blocks.blocks), heading
