"""supervisor/http/stream_cut.py: a stream cut on purpose says so in one line of its own, and
uvicorn's generic line for that request, and only that request, is dropped. Requests are tasks
here as under uvicorn, each with its own context."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

import pytest

from supervisor.errors import QualityFailed
from supervisor.http import stream_cut

UVICORN = logging.getLogger("uvicorn.error")


class Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def uvicorn_lines() -> Iterator[list[logging.LogRecord]]:
    """What reaches a handler on uvicorn's error logger, with the filter installed."""
    had_filter, level = stream_cut.FILTER in UVICORN.filters, UVICORN.level
    kept = Kept()
    UVICORN.addHandler(kept)
    UVICORN.setLevel(logging.DEBUG)
    stream_cut.install()
    yield kept.records
    UVICORN.removeHandler(kept)
    UVICORN.setLevel(level)
    if not had_filter:
        UVICORN.removeFilter(stream_cut.FILTER)


async def request(path: str, cut: bool) -> None:
    """One request's task: perhaps cut, then uvicorn's line as it writes it when the app returns
    without completing its response."""
    if cut:
        scope = {"type": "http", "method": "POST", "path": path}
        stream_cut.cut(scope, QualityFailed("chunk 3 failed its checks"))
    await asyncio.sleep(0)  # let the other request's task run in between
    UVICORN.error(stream_cut.UNFINISHED)
    UVICORN.error("Exception in ASGI application")  # any other line still passes


def test_install_puts_the_filter_on_once() -> None:
    had = stream_cut.FILTER in UVICORN.filters
    try:
        stream_cut.install()
        stream_cut.install()
        assert UVICORN.filters.count(stream_cut.FILTER) == 1
    finally:
        if not had:
            UVICORN.removeFilter(stream_cut.FILTER)


def test_only_the_cut_requests_unfinished_line_is_dropped(
    uvicorn_lines: list[logging.LogRecord],
) -> None:
    async def both() -> None:
        await asyncio.gather(
            asyncio.create_task(request("/v1/audio/speech", cut=True)),
            asyncio.create_task(request("/v1/audio/speech", cut=False)),
        )

    asyncio.run(both())
    messages = [record.getMessage() for record in uvicorn_lines]
    assert messages.count(stream_cut.UNFINISHED) == 1  # the uncut request's
    assert messages.count("Exception in ASGI application") == 2


def test_the_cut_says_what_and_why_in_one_warning(
    uvicorn_lines: list[logging.LogRecord], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="omnivoice.http"):
        asyncio.run(request("/v1/audio/clone", cut=True))
    (line,) = [r for r in caplog.records if r.name == "omnivoice.http"]
    assert line.levelno == logging.WARNING
    assert line.getMessage() == (
        "POST /v1/audio/clone: stream cut after its first bytes: qa_failed: "
        "chunk 3 failed its checks"
    )
    assert line.exc_info is None  # a line, not a traceback


def test_a_request_not_cut_keeps_uvicorns_line(uvicorn_lines: list[logging.LogRecord]) -> None:
    asyncio.run(request("/v1/audio/speech", cut=False))
    assert uvicorn_lines[0].getMessage() == stream_cut.UNFINISHED
