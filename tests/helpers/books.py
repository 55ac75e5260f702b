"""EPUBs built with ebooklib for the audiobook tests: three chapters in a nested table of
contents, a cover, a footnote and an image; and a PNG small enough to be a cover."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

from ebooklib import epub


def png(width: int = 2, height: int = 2) -> bytes:
    """A valid grey PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    rows = b"".join(b"\x00" + b"\x80" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


CHAPTERS = (
    (
        "The Harbour",
        '<h1>The Harbour</h1><p>The boats came in at dawn.<sup><a epub:type="noteref" '
        'href="notes.xhtml#n1">1</a></sup> Gulls followed them.</p>'
        '<p><img src="images/gull.png" alt="a gull"/>The nets were full.</p>'
        "<script>var x = 1;</script><style>p {color: red}</style>",
    ),
    (
        "The Market",
        "<h1>The Market</h1><p>Fish were sold by the pound.</p>"
        "<ul><li>Cod</li><li>Herring</li></ul>"
        '<aside epub:type="footnote" id="n2"><p>A note not to be read.</p></aside>',
    ),
    ("The Storm", "<h1>The Storm</h1><p>By evening the wind had turned.</p>"),
)


def build_epub(
    path: Path,
    chapters: tuple[tuple[str, str], ...] = CHAPTERS,
    *,
    title: str = "Harbour Days",
    author: str = "A. Writer",
    language: str = "en",
    cover: bool = True,
) -> Path:
    """An EPUB 3 (with an NCX too): part one holds the first two chapters, the third stands
    alone, so the table of contents is nested."""
    book = epub.EpubBook()
    book.set_identifier("harbour-days-1")
    book.set_title(title)
    book.set_language(language)
    book.add_author(author)
    if cover:
        book.set_cover("cover.png", png(4, 4))
    book.add_item(
        epub.EpubItem(
            uid="gull", file_name="images/gull.png", media_type="image/png", content=png()
        )
    )
    items = []
    for index, (name, body) in enumerate(chapters, 1):
        item = epub.EpubHtml(title=name, file_name=f"chap{index}.xhtml", lang=language)
        item.content = f"<html><body>{body}</body></html>"
        book.add_item(item)
        items.append(item)
    notes = epub.EpubHtml(title="Notes", file_name="notes.xhtml", lang=language)
    notes.content = (
        '<html><body><aside epub:type="footnote" id="n1"><p>At six.</p></aside></body></html>'
    )
    book.add_item(notes)
    links = [
        epub.Link(item.file_name, name, f"c{i}")
        for i, (item, (name, _)) in enumerate(zip(items, chapters))
    ]
    book.toc = [(epub.Section("Part One", href=items[0].file_name), links[:2]), *links[2:]]
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = ["nav", *items, notes]
    epub.write_epub(str(path), book)
    return path
