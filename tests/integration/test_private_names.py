"""No module uses another module's private names: read from the source with `ast`, a name that
starts with one underscore (not a dunder) is its module's own.

Two ways in are caught: `from m import _name` (whatever `m` is, relative imports too), and
`m._name` where `m` is bound by an import to a module of `supervisor/`, `sidecar/` or `bench/`. What the
standard library and third-party packages leave underscored on their objects (`os._exit`,
argparse's `_SubParsersAction`) is theirs to document, not a module of ours. A name two modules
share is public (no underscore, a docstring or comment saying what it is); a split that needed
one module's private names in another was made by size and is regrouped by what the parts do.
Run as a script, this prints the offenders.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests.helpers.paths import REPO_ROOT

PACKAGES = ("supervisor", "sidecar", "bench")


def module_files() -> dict[str, Path]:
    """Every module of the folders by dotted name (a package by its own name)."""
    out: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((REPO_ROOT / package).rglob("*.py")):
            parts = path.relative_to(REPO_ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def absolute(node: ast.ImportFrom, package: str) -> str:
    """The module an `from … import` reads from, relative imports resolved from `package`."""
    if not node.level:
        return node.module or ""
    parts = package.split(".")
    start = parts[: len(parts) - node.level + 1]
    return ".".join([*start, *([node.module] if node.module else [])])


def bindings(tree: ast.AST, package: str) -> dict[str, str]:
    """Each name an import binds, to the dotted module (or module.name) it stands for."""
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    bound[alias.asname] = alias.name
                else:  # `import a.b.c` binds `a`, whose attributes spell the rest
                    first = alias.name.partition(".")[0]
                    bound[first] = first
        elif isinstance(node, ast.ImportFrom):
            base = absolute(node, package)
            for alias in node.names:
                bound[alias.asname or alias.name] = f"{base}.{alias.name}"
    return bound


def dotted(node: ast.expr) -> str | None:
    """`a.b.c` for a chain of attributes on a plain name; None for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = dotted(node.value)
        return None if inner is None else f"{inner}.{node.attr}"
    return None


def private_uses(tree: ast.AST, here: str, known: set[str], package: str) -> Iterator[str]:
    """Each use of another module's private name in a module's source, as `line: what`."""
    bound = bindings(tree, package)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = absolute(node, package)
            for alias in node.names:
                if is_private(alias.name) and base != here:
                    yield f"{node.lineno}: from {base} import {alias.name}"
        elif isinstance(node, ast.Attribute) and is_private(node.attr):
            owner = dotted(node.value)
            if owner is None or owner.partition(".")[0] not in bound:
                continue
            first, _, rest = owner.partition(".")
            module = ".".join(filter(None, (bound[first], rest)))
            if module in known and module != here:
                yield f"{node.lineno}: {module}.{node.attr}"


def offenders() -> dict[str, list[str]]:
    files = module_files()
    found: dict[str, list[str]] = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(), str(path))
        uses = list(private_uses(tree, name, set(files), package))
        if uses:
            found[str(path.relative_to(REPO_ROOT))] = uses
    return found


def test_no_module_uses_another_modules_private_names() -> None:
    found = offenders()
    assert not found, f"modules that use another module's private names: {found}"


def test_the_reader_sees_every_way_in() -> None:
    """The reader is itself checked: each form is found, and what is not ours is let be."""
    known = {"supervisor.speech.text.normalize", "supervisor.jobs", "supervisor.jobs.callbacks"}
    source = (
        "import os\n"
        "import supervisor.jobs.callbacks\n"
        "import supervisor.speech.text.normalize as norm\n"
        "from supervisor.jobs import callbacks\n"
        "from supervisor.speech.text.normalize import _UNSPELLABLE, __all__\n"
        "from ..jobs import _hidden\n"
        "def f(self, obj):\n"
        "    os._exit(1); self._x; obj._y; __name__\n"
        "    return norm._RULES, callbacks._post, supervisor.jobs.callbacks._sign\n"
    )
    found = list(private_uses(ast.parse(source), "supervisor.speech.x", known, "supervisor.speech"))
    assert found == [
        "5: from supervisor.speech.text.normalize import _UNSPELLABLE",
        "6: from supervisor.jobs import _hidden",
        "9: supervisor.speech.text.normalize._RULES",
        "9: supervisor.jobs.callbacks._post",
        "9: supervisor.jobs.callbacks._sign",
    ]
    own = "from supervisor.speech.x import _mine\n"
    assert not list(private_uses(ast.parse(own), "supervisor.speech.x", known, "supervisor.speech"))


if __name__ == "__main__":
    for path, uses in offenders().items():
        for use in uses:
            print(f"{path}:{use}")
