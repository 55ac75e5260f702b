"""An EPUB's zip checked from its central directory before a byte of it is inflated.

    MAX_FILES         members in the archive
    MAX_UNCOMPRESSED  bytes all members inflate to, as the directory declares them (Python's
                      zipfile never inflates a member past its declared size, and checks its
                      CRC at the end, so a directory that lies gets an error, not a bomb)
    MAX_RATIO         how much one member may inflate (a bomb's ratio is in the thousands)

An XML member that declares an entity (`<!ENTITY`) is refused: nothing in an EPUB needs one, and
it is how both the "billion laughs" and external-entity attacks begin; with none declared, the
parsers (lxml's, without network or DTD loading) expand nothing.
"""

from __future__ import annotations

import io
import zipfile
import zlib

from supervisor.books.model import BookError

MAX_FILES = 10_000
MAX_UNCOMPRESSED = 256 * 2**20
MAX_RATIO = 200
RATIO_FLOOR = 1 * 2**20  # members inflating to less than this may have any ratio
XML_SUFFIXES = (".xml", ".opf", ".ncx", ".xhtml", ".html", ".htm", ".svg", ".smil")
ENTITY_MARKS = (b"<!ENTITY", "<!ENTITY".encode("utf-16-le"), "<!ENTITY".encode("utf-16-be"))


def opened(data: bytes) -> zipfile.ZipFile:
    """The book's zip, its directory within bounds; BookError says what is wrong."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError) as exc:
        raise BookError(f"the EPUB is not a readable zip archive ({exc})") from None
    members = archive.infolist()
    if len(members) > MAX_FILES:
        raise BookError(f"the EPUB holds {len(members)} files; at most {MAX_FILES} are read")
    total = sum(member.file_size for member in members)
    if total > MAX_UNCOMPRESSED:
        raise BookError(
            f"the EPUB inflates to {total} bytes; at most {MAX_UNCOMPRESSED} are read "
            "(a zip bomb, or a book of that size)"
        )
    for member in members:
        ratio = member.file_size / max(member.compress_size, 1)
        if member.file_size > RATIO_FLOOR and ratio > MAX_RATIO:
            raise BookError(
                f"the EPUB's member {member.filename!r} inflates {ratio:.0f}-fold "
                f"(at most {MAX_RATIO}): a zip bomb"
            )
        if member.flag_bits & 0x1:
            raise BookError(f"the EPUB's member {member.filename!r} is encrypted")
    return archive


def refuse_entities(archive: zipfile.ZipFile) -> None:
    """BookError for an XML member that declares an entity, or that cannot be inflated."""
    for member in archive.infolist():
        if not member.filename.lower().endswith(XML_SUFFIXES):
            continue
        data = read(archive, member.filename)
        if any(mark in data for mark in ENTITY_MARKS):
            raise BookError(
                f"the EPUB's {member.filename!r} declares an XML entity; books with entity "
                "declarations are refused"
            )


def read(archive: zipfile.ZipFile, name: str) -> bytes:
    try:
        return archive.read(name)
    except (zipfile.BadZipFile, OSError, ValueError, KeyError, EOFError, zlib.error) as exc:
        raise BookError(f"the EPUB's member {name!r} cannot be read ({exc})") from None
