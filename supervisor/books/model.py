"""A book as the audiobook route reads it, and the error every book it cannot read gets."""

from __future__ import annotations

from dataclasses import dataclass, field

from supervisor.errors import InvalidRequest


class BookError(InvalidRequest):
    """A 400 about the uploaded book (`param` "file"), saying what is wrong with it."""

    def __init__(self, message: str, param: str = "file") -> None:
        super().__init__(message, param=param)
        self.code = "invalid_book"


@dataclass(frozen=True)
class Chapter:
    title: str
    text: str  # paragraphs separated by blank lines


@dataclass(frozen=True)
class Book:
    title: str
    chapters: list[Chapter]
    author: str | None = None
    language: str | None = None
    cover: bytes | None = field(default=None, repr=False)
    cover_type: str | None = None  # its media type: image/jpeg or image/png

    @property
    def chars(self) -> int:
        return sum(len(chapter.text) for chapter in self.chapters)
