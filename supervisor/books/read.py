"""Which kind of book a file is, and the book read from it.

An EPUB is a zip whose first member is `mimetype` (`application/epub+zip`), or any zip sent as
`.epub`; Markdown is `.md` or `.markdown`; plain text `.txt`, or a file without one of these
names that is UTF-8 text. Anything else is a 400 naming what was found. Every book is bounded
before it is read (`MAX_BOOK_BYTES`, and `archive`'s bounds on a zip) and refused with a 400 when
it has no text to read.
"""

from __future__ import annotations

import posixpath

from supervisor.books import epub, plain
from supervisor.books.model import Book, BookError

MAX_BOOK_BYTES = 64 * 2**20
ZIP_MAGIC = b"PK\x03\x04"
KNOWN = "EPUB (.epub), Markdown (.md, .markdown) or plain UTF-8 text (.txt)"


def kind(data: bytes, filename: str) -> str:
    """ "epub", "markdown" or "text"; BookError for anything else."""
    suffix = posixpath.splitext(filename.lower())[1]
    if data.startswith(ZIP_MAGIC):
        if suffix == ".epub" or data[30:38] == b"mimetype":
            return "epub"
        raise BookError(f"the file is a zip archive but not an EPUB; send {KNOWN}")
    if suffix == ".epub":
        raise BookError("the file is named .epub but is not a zip archive: it is not an EPUB")
    if suffix in (".md", ".markdown"):
        return "markdown"
    if suffix in (".txt", ".text", ""):
        return "text"
    head = data[:4096]
    if b"\x00" in head:
        raise BookError(f"the file {filename!r} is neither a book nor text; send {KNOWN}")
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 4:  # not a character cut in two by the slice
            raise BookError(
                f"the file {filename!r} is neither an EPUB nor UTF-8 text; send {KNOWN}"
            ) from None
    return "text"


def stem(filename: str) -> str:
    base = posixpath.basename(filename.replace("\\", "/"))
    return posixpath.splitext(base)[0] or "book"


def read(data: bytes, filename: str) -> Book:
    """The book in `data` (sent as `filename`); BookError says what is wrong with it."""
    if len(data) > MAX_BOOK_BYTES:
        raise BookError(f"the book is {len(data)} bytes; at most {MAX_BOOK_BYTES} are read")
    if not data.strip():
        raise BookError("the book file is empty")
    found = kind(data, filename)
    title = stem(filename)
    if found == "epub":
        book = epub.read(data, title)
    else:
        book = plain.read(data, title, found == "markdown")
    if not book.chapters:
        raise BookError("the book has no text to read: no chapter holds any words")
    return book
