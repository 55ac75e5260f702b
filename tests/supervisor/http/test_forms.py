"""supervisor/http/forms.py: form fields decoded strictly (a field that is not valid text is a
400 naming it, never other text), and a form that cannot be parsed is a 400."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from supervisor.errors import InvalidRequest
from supervisor.http.forms import parse_form


async def fields(request: Request) -> JSONResponse:
    multipart = request.headers.get("content-type", "").startswith("multipart/")
    try:
        form = await parse_form(
            request, multipart=multipart, max_files=1, max_fields=3, max_part_size=1024
        )
    except InvalidRequest as exc:
        return JSONResponse(exc.to_body(), status_code=exc.status)
    shown = {k: v if isinstance(v, str) else f"file:{v.filename}" for k, v in form.multi_items()}
    await form.close()  # the upload's spooled file
    return JSONResponse(shown)


def client() -> TestClient:
    return TestClient(Starlette(routes=[Route("/form", fields, methods=["POST"])]))


def multipart(*parts: tuple[str, bytes, str]) -> tuple[bytes, dict[str, str]]:
    """A multipart body of (name, value, extra part header) by hand: the client library would
    not send a field that is not valid text."""
    body = b""
    for name, value, extra in parts:
        body += f'--B\r\nContent-Disposition: form-data; name="{name}"{extra}\r\n\r\n'.encode()
        body += value + b"\r\n"
    return body + b"--B--\r\n", {"Content-Type": "multipart/form-data; boundary=B"}


URLENCODED = {"Content-Type": "application/x-www-form-urlencoded"}


def test_valid_fields_of_both_kinds_are_read_as_sent() -> None:
    c = client()
    body, headers = multipart(
        ("input", "héllo".encode(), ""), ("file", b"RIFF", '; filename="a.wav"')
    )
    assert c.post("/form", content=body, headers=headers).json() == {
        "input": "héllo",
        "file": "file:a.wav",
    }
    sent = c.post("/form", content=b"input=h%C3%A9llo+there&voice=a", headers=URLENCODED)
    assert sent.json() == {"input": "héllo there", "voice": "a"}


def test_a_multipart_field_not_utf8_is_a_400_naming_it() -> None:
    body, headers = multipart(("voice", b"a", ""), ("input", b"caf\xe9", ""))
    refused = client().post("/form", content=body, headers=headers)
    assert refused.status_code == 400
    assert refused.json()["error"]["param"] == "input"
    assert refused.json()["error"]["code"] == "invalid_text"


def test_an_urlencoded_field_not_utf8_is_a_400_naming_it() -> None:
    refused = client().post("/form", content=b"voice=a&input=caf%E9", headers=URLENCODED)
    assert refused.status_code == 400
    assert refused.json()["error"]["param"] == "input"
    assert refused.json()["error"]["code"] == "invalid_text"


def test_a_form_over_its_bounds_is_a_400() -> None:
    many = client().post("/form", content=b"a=1&b=2&c=3&d=4", headers=URLENCODED)
    assert many.status_code == 400
    assert "could not be parsed" in many.json()["error"]["message"]
    body, headers = multipart(("input", b"x" * 2000, ""))
    assert client().post("/form", content=body, headers=headers).status_code == 400
