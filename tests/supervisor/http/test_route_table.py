"""The route table is the one place routes are written: the app, auth, body limits and the
OpenAPI document all read it, and the error drawing names every error there is."""

from __future__ import annotations

import inspect
import re

from supervisor import __version__, errors
from supervisor.http import openapi, route_table
from supervisor.settings import Settings


def test_the_openapi_document_has_every_http_route_of_the_table_and_no_other() -> None:
    settings = Settings(model="/tmp/model")
    paths = openapi.document(settings)["paths"]
    documented = {(path, m) for path, item in paths.items() for m in item if m != "parameters"}
    table = {
        (re.sub(r":\w+}", "}", r.path), r.method.lower())
        for r in route_table.ROUTES
        if r.method != route_table.WEBSOCKET
    }
    assert documented == table
    for r in route_table.ROUTES:  # the open routes, and only they, say they need no key
        if r.method != route_table.WEBSOCKET:
            operation = paths[re.sub(r":\w+}", "}", r.path)][r.method.lower()]
            assert (operation.get("security") == []) is r.open, r.path


def test_auth_and_body_limits_follow_the_table() -> None:
    settings = Settings(model="/tmp/model")
    open_paths = route_table.open_patterns()
    assert any(p.match("/console/console.js") for p in open_paths)
    assert not any(
        p.match(path) for p in open_paths for path in ("/v1/jobs", "/metrics", "/v1/cache")
    )
    limits = {(p.pattern, m): n for p, m, n in route_table.body_limits(settings.http)}
    assert limits[("^/v1/audio/lexicons/(?P<name>[^/]+)$", "PUT")] == route_table.lexicon_body(
        settings.http
    )
    assert limits[("^/v1/audio/speech$", "POST")] == 64 * 1024 + 16 * settings.http.max_input_chars
    every_body = {(r.path, r.method) for r in route_table.ROUTES if r.method in ("POST", "PUT")}
    assert len(every_body) == len(limits)  # every route that takes a body has a limit


def test_the_version_is_the_package_metadata() -> None:
    assert openapi.document(Settings(model="/tmp/model"))["info"]["version"] == __version__
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", __version__)


def test_the_error_drawing_names_every_error_with_its_status() -> None:
    drawing = errors.__doc__ or ""
    classes = [
        c
        for _, c in inspect.getmembers(errors, inspect.isclass)
        if issubclass(c, errors.ServerError)
    ]
    for cls in classes:
        line = next((ln for ln in drawing.splitlines() if f" {cls.__name__} " in ln), None)
        assert line is not None, f"{cls.__name__} is missing from the drawing in errors.py"
        assert str(cls.status) in line, cls.__name__
