"""The import graph has floors: read from the source with `ast`, every import counted, those under
`if TYPE_CHECKING:` and inside functions too (a circle of knowledge is still a circle).

- The ground floor of `supervisor/` (`errors`, `metrics`, `settings`, `tenants`, `database` and
  the small type modules beside them) imports nothing of `supervisor/` above it.
- No circle of imports crosses folders: where modules import each other round a loop, they all
  lie in one folder. The same holds in `sidecar/`.

`supervisor/__init__.py` (the version, read from the package metadata) is below them all: every
import of a module runs it. Run as a script, this prints the circles across folders it finds and
those inside one folder.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests.helpers.paths import REPO_ROOT

PACKAGES = ("supervisor", "sidecar")
# The ground floor: modules every other one may use, which use none of them (a package: all of it)
GROUND_FLOOR = (
    "supervisor.errors",
    "supervisor.storage_errors",
    "supervisor.metrics",
    "supervisor.settings",
    "supervisor.tenants",
    "supervisor.database",
    "supervisor.format_names",
    "supervisor.qa_summary",
    "supervisor.pool_health",
)


def module_files() -> dict[str, Path]:
    """Every module of the packages by dotted name (a package by its own name)."""
    out: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((REPO_ROOT / package).rglob("*.py")):
            parts = path.relative_to(REPO_ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = path
    return out


def imported(tree: ast.AST, here: str, known: set[str], package: str = "") -> Iterator[str]:
    """The modules of `known` that a module's source imports, anywhere in it. `package`: the
    package a relative import starts from (the module's own, or itself for an `__init__`)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package, one level up per dot after the first
                start = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*start, *([base] if base else [])])
            # `from a.b import c` is a.b.c when c is a module, else a name of a.b
            names = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != here:
                yield name


def import_graph() -> dict[str, set[str]]:
    files = module_files()
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(), str(path))
        graph[name] = set(imported(tree, name, set(files), package))
    return graph


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        for child in graph[todo.pop()] - seen:
            seen.add(child)
            todo.append(child)
    return seen


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other round a loop (strongly connected, more than
    one module), each sorted, in order of their first module."""
    reach = {name: reachable(graph, name) for name in graph}
    found: list[list[str]] = []
    placed: set[str] = set()
    for name in sorted(graph):
        if name in placed:
            continue
        part = sorted(m for m in reach[name] if name in reach[m])
        placed.update(part)
        if len(part) > 1:
            found.append(part)
    return found


def circles_across_folders(graph: dict[str, set[str]]) -> list[list[str]]:
    files = module_files()
    return [part for part in circles(graph) if len({files[m].parent for m in part}) > 1]


def on_ground_floor(name: str) -> bool:
    return any(name == floor or name.startswith(floor + ".") for floor in GROUND_FLOOR)


def test_the_ground_floor_imports_nothing_above_it() -> None:
    graph = import_graph()
    above = {
        name: sorted(m for m in targets if m.startswith("supervisor.") and not on_ground_floor(m))
        for name, targets in graph.items()
        if on_ground_floor(name)
    }
    above = {name: targets for name, targets in above.items() if targets}
    assert not above, f"the ground floor imports modules above it: {above}"


def test_no_circle_of_imports_crosses_folders() -> None:
    found = circles_across_folders(import_graph())
    assert not found, f"{len(found)} circle(s) of imports across folders: {found}"


def test_the_graph_sees_type_checking_and_function_imports() -> None:
    """The reader of imports is itself checked: both kinds the runtime misses are edges."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from supervisor.speech import quality\n"
        "def f():\n    import supervisor.jobs.callbacks\n"
        "from supervisor.settings import Settings\n"
    )
    known = {"supervisor.speech.quality", "supervisor.jobs.callbacks", "supervisor.settings"}
    found = set(imported(ast.parse(source), "supervisor.x", known))
    assert found == known
    relative = "from . import quality\nfrom ..jobs import callbacks\n"
    found = set(imported(ast.parse(relative), "supervisor.speech.x", known, "supervisor.speech"))
    assert found == {"supervisor.speech.quality", "supervisor.jobs.callbacks"}
    loop = {"a.x": {"b.y"}, "b.y": {"a.x"}, "c.z": {"a.x"}}
    assert circles(loop) == [["a.x", "b.y"]]


if __name__ == "__main__":
    graph = import_graph()
    found = circles_across_folders(graph)
    print(f"{len(found)} circle(s) across folders")
    for part in found:
        print(f"  {len(part)} modules: {' '.join(part)}")
    inside = [part for part in circles(graph) if part not in found]
    print(f"{len(inside)} circle(s) inside one folder")
    for part in inside:
        print(f"  {len(part)} modules: {' '.join(part)}")
