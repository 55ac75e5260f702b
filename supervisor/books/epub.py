"""An EPUB 2 or 3 read with ebooklib, after `archive` has checked its zip.

Reading order is the spine's (items marked `linear="no"` and the navigation document skipped).
A chapter starts at each spine document the table of contents points at (the EPUB 3 navigation
document, else the NCX) and takes the documents after it until the next one; documents before
the first are a chapter of their own, named after their first heading. Nested entries are
flattened in reading order, each titled with its numbering ("2.1 Arrival") when the table is
nested. A chapter without text (a cover page, an image) is left out. Title, author and
language come from the package's Dublin Core metadata, the cover from the item the package
marks as such (EPUB 3 `cover-image`, EPUB 2 `<meta name="cover">`).
"""

from __future__ import annotations

import io
import posixpath
import zipfile
from collections.abc import Iterable, Iterator
from typing import Any
from urllib.parse import unquote

from supervisor.books import archive, xhtml
from supervisor.books.model import Book, BookError, Chapter

COVER_TYPES = frozenset({"image/jpeg", "image/png"})
MAX_COVER_BYTES = 8 * 2**20


def _document(href: str) -> str:
    return posixpath.normpath(unquote(href.split("#", 1)[0])) if href else ""


def _flatten(toc: Iterable[Any], prefix: str = "") -> Iterator[tuple[str, str, bool]]:
    """(href, numbered title, nested) for each entry of ebooklib's toc, in order."""
    for position, entry in enumerate(toc, 1):
        number = f"{prefix}{position}"
        if isinstance(entry, tuple):
            section, children = entry
            yield (
                _document(getattr(section, "href", "") or ""),
                f"{number}\x00{section.title}",
                True,
            )
            yield from _flatten(children, f"{number}.")
        else:
            yield _document(entry.href), f"{number}\x00{entry.title}", bool(prefix)


def titles(toc: Iterable[Any]) -> dict[str, str]:
    """Each document the table of contents points at, with its entries' titles ("1 Part One —
    1.1 The Harbour" for a part that starts with its first chapter)."""
    entries = list(_flatten(toc))
    nested = any(is_nested for _, _, is_nested in entries)
    out: dict[str, str] = {}
    for href, raw, _ in entries:
        number, title = raw.split("\x00", 1)
        title = " ".join((title or "").split())
        if href and title:
            named = f"{number} {title}" if nested else title
            out[href] = f"{out[href]} — {named}" if href in out else named
    return out


def _meta(book: Any, name: str) -> str | None:
    values = book.get_metadata("DC", name)
    for value, _ in values:
        if isinstance(value, str) and value.strip():
            return " ".join(value.split())
    return None


def _cover(book: Any) -> tuple[bytes | None, str | None]:
    import ebooklib

    candidates = list(book.get_items_of_type(ebooklib.ITEM_COVER))
    for _, attributes in book.get_metadata("OPF", "meta"):  # EPUB 2: <meta name="cover">
        if attributes.get("name") == "cover":
            item = book.get_item_with_id(attributes.get("content", ""))
            if item is not None:
                candidates.append(item)
    for item in candidates:
        kind = (item.media_type or "").lower()
        content = item.get_content()
        if kind in COVER_TYPES and 0 < len(content) <= MAX_COVER_BYTES:
            return content, kind
    return None, None


def _spine(book: Any) -> Iterator[tuple[str, bytes]]:
    """(document path, content) of each linear spine document that is not the navigation."""
    import ebooklib

    for idref, linear in book.spine:
        item = book.get_item_with_id(idref)
        if item is None or linear == "no" or isinstance(item, ebooklib.epub.EpubNav):
            continue
        if "nav" in (getattr(item, "properties", None) or []):
            continue
        yield posixpath.normpath(item.get_name()), item.get_content()


def chapters(documents: Iterable[tuple[str, bytes]], named: dict[str, str]) -> list[Chapter]:
    """The documents cut into chapters where the table of contents points."""
    basenames = {posixpath.basename(href): title for href, title in named.items()}
    out: list[tuple[str, list[str]]] = []
    for path, content in documents:
        title = named.get(path) or basenames.get(posixpath.basename(path))
        text, heading = xhtml.text_of(content)
        if title is not None or not out:
            out.append((title or heading or "", []))
        if text:
            out[-1][1].append(text)
    result = []
    for number, (title, texts) in enumerate(out, 1):
        if texts:
            result.append(Chapter(title or f"Chapter {number}", "\n\n".join(texts)))
    return result


def read(data: bytes, fallback_title: str) -> Book:
    """The EPUB's metadata, cover and chapters; BookError says what is wrong with it."""
    from ebooklib import epub

    with archive.opened(data) as zipped:
        archive.refuse_entities(zipped)
    try:
        book = epub.read_epub(io.BytesIO(data), {"ignore_ncx": False})
    except BookError:
        raise
    except (epub.EpubException, zipfile.BadZipFile, KeyError, AttributeError, IndexError) as exc:
        raise BookError(f"the EPUB cannot be read: {exc}") from None
    except Exception as exc:  # ebooklib's parsing raises whatever lxml or its own code did
        raise BookError(f"the EPUB is malformed: {type(exc).__name__}: {exc}") from None
    documents = list(_spine(book))
    if not documents:
        raise BookError("the EPUB's spine lists no documents: there is nothing to read")
    cover, cover_type = _cover(book)
    return Book(
        title=_meta(book, "title") or fallback_title,
        chapters=chapters(documents, titles(book.toc)),
        author=_meta(book, "creator"),
        language=_meta(book, "language"),
        cover=cover,
        cover_type=cover_type,
    )
