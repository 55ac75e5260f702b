"""Markdown and plain text as chapters.

Markdown: a chapter starts at each heading of the highest level the text uses (`#`, or `##`
when there is no `#`); the heading is its title. A single `#` heading that comes first, over
`##` ones, is the book's title (as a Markdown book is often written), and its `##` headings cut
the chapters. Plain text: a chapter starts at each line that
is a chapter heading on its own ("Chapter 3", "CHAPTER IV. The Storm", "Part Two"); without any,
the whole text is one chapter named after the book. Text before the first heading is a chapter
of its own when it is more than a title. Markdown markup is taken out: images, link targets,
emphasis marks, code fences, block quote and list markers.
"""

from __future__ import annotations

import re

from supervisor.books.model import Book, BookError, Chapter

HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
NUMBER = r"(?:\d+|[IVXLCDM]+|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|[a-z]+teen|(?:twenty|thirty|forty|fifty)(?:[- ]\w+)?)"
CHAPTER_LINE = re.compile(
    rf"^[ \t]*((?:chapter|part|book|prologue|epilogue)\b(?:[ \t]+{NUMBER}\b)?[^\n]{{0,80}})$",
    re.MULTILINE | re.IGNORECASE,
)
IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)")
LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
FENCE = re.compile(r"^```.*?^```[ \t]*$", re.MULTILINE | re.DOTALL)
MARKS = re.compile(r"(\*\*|__|\*|`)")
QUOTE = re.compile(r"^[ \t]*>[ \t]?", re.MULTILINE)
LIST_ITEM = re.compile(r"^[ \t]*(?:[-*+]|\d+[.)])[ \t]+", re.MULTILINE)
BLANK = re.compile(r"\n[ \t]*\n\s*")


def decoded(data: bytes) -> str:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BookError(f"the book is not UTF-8 text (byte {exc.start} is not UTF-8)") from None
    if "\x00" in text:
        raise BookError("the book holds NUL characters: it is not text")
    return text.replace("\r\n", "\n").replace("\r", "\n")


def closed(heading: str) -> str:
    """A heading read as a sentence of its own."""
    return f"{heading}." if heading[-1:].isalnum() else heading


def unmarked(text: str) -> str:
    """Markdown's markup taken out: headings and list items are paragraphs of their own,
    separated by one blank line."""
    text = FENCE.sub("", text)
    text = HEADING.sub(lambda m: f"\n\n{closed(m.group(2))}\n\n", text)
    text = IMAGE.sub("", text)
    text = LINK.sub(r"\1", text)
    text = LIST_ITEM.sub("\n\n", text)
    text = QUOTE.sub("", text)
    text = MARKS.sub("", text)
    paragraphs = (" ".join(p.split()) for p in BLANK.split(text))
    return "\n\n".join(p for p in paragraphs if p)


def _cut(text: str, starts: list[tuple[int, int, str]], title: str) -> list[Chapter]:
    """Chapters from (start of heading, end of heading, title) marks."""
    out = []
    lead = unmarked(text[: starts[0][0]]) if starts else unmarked(text)
    if lead and (not starts or len(lead.split()) > 12):
        out.append(Chapter(title, lead))
    for index, (_, end, name) in enumerate(starts):
        stop = starts[index + 1][0] if index + 1 < len(starts) else len(text)
        body = unmarked(text[end:stop])
        if body:
            heading = unmarked(name)
            out.append(Chapter(heading, f"{closed(heading)}\n\n{body}"))
    return out


def read(data: bytes, title: str, markdown: bool) -> Book:
    text = decoded(data)
    starts: list[tuple[int, int, str]] = []
    if markdown:
        headings = [
            (m.start(), m.end(), len(m.group(1)), m.group(2))
            for m in HEADING.finditer(FENCE.sub(lambda m: " " * len(m.group()), text))
        ]
        levels = sorted({level for _, _, level, _ in headings})
        if (
            len(levels) > 1
            and [h[2] for h in headings].count(levels[0]) == 1
            and headings[0][2] == levels[0]
        ):
            # one `#` heading first, over `##` ones: the book's title, not its only chapter
            title = unmarked(headings[0][3]) or title
            headings, levels = headings[1:], levels[1:]
        starts = (
            [(s, e, name) for s, e, level, name in headings if level == levels[0]]
            if headings
            else []
        )
    if not starts:
        starts = [(m.start(), m.end(), m.group(1).strip()) for m in CHAPTER_LINE.finditer(text)]
    chapters = _cut(text, starts, title)
    return Book(title=title, chapters=chapters)
