"""Form bodies whose text must be valid: invalid UTF-8 in a field is a 400, not mojibake.

Starlette's parsers read a multipart text field that is not valid in its charset as Latin-1, and
an urlencoded one with U+FFFD for each bad byte: a field the client got wrong would reach the
model as other text. These parsers decode each text field strictly instead (a multipart form
in its declared charset, UTF-8 by default; an urlencoded one as UTF-8), and refuse it naming
the field.
"""

from __future__ import annotations

from urllib.parse import unquote_to_bytes

from starlette.datastructures import FormData
from starlette.formparsers import FormParser, MultiPartException, MultiPartParser
from starlette.requests import Request

from supervisor.errors import InvalidRequest


class NotText(MultiPartException):
    """A field's value is not valid in its charset."""

    def __init__(self, field: str, charset: str) -> None:
        super().__init__(f"form field {field!r} is not valid {charset} text")
        self.field = field


def _decoded(raw: bytes, charset: str, field: str) -> str:
    try:
        return raw.decode(charset)
    except (UnicodeDecodeError, LookupError):
        raise NotText(field, charset) from None


class FileTooMany(MultiPartException):
    """A file part past the form's last: named, so the 400 names the field."""

    def __init__(self, field: str, max_files: int | float) -> None:
        files = "one file" if max_files == 1 else f"{max_files:g} files"
        super().__init__(f"form field {field!r} is a file, and this form takes {files} at most")
        self.field = field


class StrictMultiPartParser(MultiPartParser):
    def on_headers_finished(self) -> None:
        try:
            super().on_headers_finished()
        except MultiPartException as exc:
            if self._current_files <= self.max_files:  # not the file count: as Starlette says
                raise
            raise FileTooMany(self._current_part.field_name, self.max_files) from exc

    def on_part_end(self) -> None:
        part = self._current_part
        if part.file is None:
            self.items.append(
                (part.field_name, _decoded(bytes(part.data), self._charset, part.field_name))
            )
        else:
            super().on_part_end()


class StrictFormParser(FormParser):
    def on_field_end(self) -> None:
        # What FormParser does, but '+' and %XX are undone on bytes, then decoded strictly.
        self._current_fields += 1
        if self._current_fields > self.max_fields:
            raise MultiPartException(
                f"Too many fields. Maximum number of fields is {self.max_fields}."
            )
        name = unquote_to_bytes(bytes(self._field_name).replace(b"+", b" "))
        value = unquote_to_bytes(bytes(self._field_value).replace(b"+", b" "))
        field = name.decode("utf-8", "replace")
        self._items.append((_decoded(name, "utf-8", field), _decoded(value, "utf-8", field)))


async def parse_form(
    request: Request, *, multipart: bool, max_files: int, max_fields: int, max_part_size: int
) -> FormData:
    """The request's form (multipart, else urlencoded), its text fields decoded strictly; a form
    that cannot be parsed, or a field that is not valid text, is a 400."""
    try:
        if multipart:
            return await StrictMultiPartParser(
                request.headers,
                request.stream(),
                max_files=max_files,
                max_fields=max_fields,
                max_part_size=max_part_size,
            ).parse()
        return await StrictFormParser(
            request.headers, request.stream(), max_fields=max_fields, max_part_size=max_part_size
        ).parse()
    except NotText as exc:
        error = InvalidRequest(f"{exc.message}: send UTF-8", param=exc.field)
        error.code = (
            "invalid_text"  # as text with a lone surrogate (field_checks.refuse_unencodable)
        )
        raise error from None
    except FileTooMany as exc:
        raise InvalidRequest(f"{exc.message}.", param=exc.field) from None
    except MultiPartException as exc:
        raise InvalidRequest(f"The form could not be parsed: {exc.message}") from None
