"""supervisor/http/openapi.py: the document's shape. Every documented route under its path and
method, the open ones without security, path parameters declared, every reference resolving,
and a speech request read by the document as the server reads it (the live document is fuzzed
in tests/integration/test_api_fuzz.py)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from supervisor.http.openapi import document
from supervisor.http.route_table import ROUTES
from supervisor.settings import Settings


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    return document(Settings(engine="null", max_input_chars=500))


def refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                yield value
            else:
                yield from refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from refs(value)


def test_the_head_of_the_document(doc: dict[str, Any]) -> None:
    assert doc["openapi"] == "3.1.0"
    assert doc["security"] == [{"bearer": []}]
    assert doc["components"]["securitySchemes"]["bearer"] == {"type": "http", "scheme": "bearer"}


def test_every_documented_route_is_under_its_path_and_method(doc: dict[str, Any]) -> None:
    documented = [r for r in ROUTES if r.operation is not None]
    assert len(documented) > 20
    for route in documented:
        path = re.sub(r"{(\w+)(?::\w+)?}", r"{\1}", route.path)
        operation = doc["paths"][path][route.method.lower()]
        assert "responses" in operation, path
        assert (operation.get("security") == []) == route.open, path
    hidden = [r.path for r in ROUTES if r.operation is None]
    assert all(p not in doc["paths"] for p in hidden if "{" not in p)


def test_each_path_parameter_is_declared(doc: dict[str, Any]) -> None:
    for path, item in doc["paths"].items():
        named = set(re.findall(r"{(\w+)}", path))
        declared = {p["name"] for p in item.get("parameters", []) if p["in"] == "path"}
        assert declared == named, path
    assert doc["paths"]["/v1/jobs/{job_id}/items/{n}/audio"]["parameters"][1]["schema"] == {
        "type": "integer",
        "minimum": 0,
    }


def test_every_reference_resolves(doc: dict[str, Any]) -> None:
    found = set(refs(doc))
    assert "#/components/schemas/ErrorResponse" in found
    for ref in found:
        assert ref.startswith("#/components/schemas/"), ref
        assert ref.rsplit("/", 1)[1] in doc["components"]["schemas"], ref


def test_the_speech_request_reads_as_the_server_reads_it(doc: dict[str, Any]) -> None:
    schema = {
        **doc["components"]["schemas"]["CreateSpeechRequest"],
        "components": doc["components"],
    }
    valid = Draft202012Validator(schema)
    assert valid.is_valid({"model": "tts-1", "input": "Hello.", "voice": "alloy", "speed": None})
    assert not valid.is_valid({"input": "x" * 501})  # the settings' --max-input-chars
    assert not valid.is_valid({"input": "   "})
    assert not valid.is_valid({"input": "Hello.", "no_such_field": 1})
    assert not valid.is_valid({"voice": "alloy"})
