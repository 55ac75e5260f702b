"""No module of `supervisor/` or `sidecar/` grows past MAX_LINES: one that does is split by what
its parts do (docs/ARCHITECTURE.md, "Checks").

The count is of lines as `ruff format` writes them: the test counts the lines on disk, and CI runs
`ruff format --check` before the tests, so a file that passes is one the formatter would keep
as it is (and no `# fmt: skip` or `# fmt: off` may join lines it would split)."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 400


def line_counts() -> dict[str, int]:
    return {
        path.relative_to(REPO_ROOT).as_posix(): len(path.read_bytes().splitlines())
        for package in ("supervisor", "sidecar")
        for path in sorted((REPO_ROOT / package).rglob("*.py"))
    }


def test_no_module_is_over_the_limit() -> None:
    over = {path: lines for path, lines in line_counts().items() if lines > MAX_LINES}
    assert not over, f"over {MAX_LINES} lines (split each by what its parts do): {over}"
