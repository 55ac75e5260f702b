"""Zip bounds, checked on the directory before anything is inflated, and XML entities refused."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from supervisor.books import archive, read
from supervisor.books.model import BookError
from tests.helpers.books import build_epub


def zipped(members: dict[str, bytes], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", method) as z:
        z.writestr("mimetype", b"application/epub+zip", zipfile.ZIP_STORED)
        for name, data in members.items():
            z.writestr(name, data)
    return out.getvalue()


def refusal(data: bytes, name: str = "book.epub") -> str:
    with pytest.raises(BookError) as caught:
        read.read(data, name)
    assert caught.value.param == "file" and caught.value.code == "invalid_book"
    return caught.value.message


def test_a_zip_bomb_is_refused_from_its_directory() -> None:
    bomb = zipped({"OEBPS/zeros.xhtml": b"\x00" * (8 * 2**20)})
    assert len(bomb) < 64 * 1024
    assert "zip bomb" in refusal(bomb) and "inflates" in refusal(bomb)


def test_too_many_files_and_too_many_bytes_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(archive, "MAX_FILES", 5)
    many = zipped({f"f{i}.txt": b"x" for i in range(5)})
    assert "holds 6 files; at most 5" in refusal(many)
    monkeypatch.setattr(archive, "MAX_UNCOMPRESSED", 1000)
    big = zipped({"a.txt": bytes(range(256)) * 4}, zipfile.ZIP_STORED)
    assert "inflates to 1044 bytes; at most 1000" in refusal(big)


def test_an_entity_declaration_is_refused_before_any_xml_is_parsed(tmp_path: Path) -> None:
    source = zipfile.ZipFile(build_epub(tmp_path / "b.epub"))
    laughs = b'<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "haha"><!ENTITY b "&a;&a;&a;">]>'
    members = {
        i.filename: (laughs + source.read(i.filename).split(b"?>", 1)[1])
        if i.filename.endswith(".opf")
        else source.read(i.filename)
        for i in source.infolist()
        if i.filename != "mimetype"
    }
    assert "declares an XML entity" in refusal(zipped(members))


def test_malformed_and_unknown_books_say_what_is_wrong(tmp_path: Path) -> None:
    assert "not a readable zip archive" in refusal(b"PK\x03\x04" + b"\x00" * 100)
    assert "cannot be read" in refusal(zipped({"hello.txt": b"hi"}))
    assert "not a zip archive" in refusal(b"plain words", "b.epub")
    assert "neither a book nor text" in refusal(b"%PDF-1.4\x00\x01\x02", "b.pdf")
    assert "is empty" in refusal(b"", "b.txt")
    images_only = (("Pictures", '<p><img src="images/gull.png"/></p>'),)
    epub_without_text = build_epub(tmp_path / "pictures.epub", images_only).read_bytes()
    assert "no text to read" in refusal(epub_without_text)
