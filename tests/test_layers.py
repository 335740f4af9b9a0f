"""The layering that docs/architecture.md declares holds in the code: no module imports a package that stands
lower in the table, and no modules import each other in a circle.

The table is read from the document itself, so the two cannot drift. Every import counts: at module level,
inside functions, under `TYPE_CHECKING`, relative or absolute.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO

ARCHITECTURE = REPO / "docs" / "architecture.md"
SRC = REPO / "src"
_TABLE_NAME = re.compile(r"^\|\s*`(weightkit(?:\.\w+)?)`\s*\|")
#: one test process reads the import graph (`import_graph`) for the two tests that walk it
pytestmark = pytest.mark.xdist_group("import_graph")


def layer_table() -> list[str]:
    """The first column of the table under "## Layers", top to bottom: `weightkit.<name>` per row."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text.split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    return [m[1] for line in section.splitlines() if (m := _TABLE_NAME.match(line))]


def source_modules() -> dict[str, Path]:
    """Every module under src/weightkit by its dotted name (a package by its own name, not `__init__`)."""
    modules = {}
    for path in sorted((SRC / "weightkit").rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def imports(name: str, path: Path, modules: dict[str, Path]) -> Iterator[tuple[str, int]]:
    """(module imported, line) for every import statement in the module `name`: a `from X import y` names
    the module X.y when there is one, else X."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in statements(ast.parse(path.read_text(encoding="utf-8"), str(path)).body):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "weightkit":
                    yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                origin = ".".join([*base, node.module] if node.module else base)
            else:
                origin = node.module or ""
            if origin.split(".")[0] != "weightkit":
                continue
            for alias in node.names:
                yield (f"{origin}.{alias.name}" if f"{origin}.{alias.name}" in modules else origin), node.lineno


def statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement in `body` and in the bodies nested in it (functions, classes, branches, handlers, match
    cases): where an import can stand, without walking the expressions, which hold none and most of the nodes."""
    stack = list(reversed(body))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.stmt):
            yield node
        for field in node._fields:
            value = getattr(node, field, None)
            if isinstance(value, list):
                stack.extend(x for x in reversed(value) if isinstance(x, (ast.stmt, ast.excepthandler, ast.match_case)))


def layer_of(module: str) -> str:
    """The table row a module belongs to: `weightkit` for the package's own `__init__`, else its top part."""
    return ".".join(module.split(".")[:2])


@functools.cache
def import_graph() -> dict[str, dict[str, int]]:
    """module -> {module it imports: the first line that does}; read once a process (two tests walk it)."""
    modules = source_modules()
    graph: dict[str, dict[str, int]] = {}
    for name, path in modules.items():
        edges = graph.setdefault(name, {})
        for target, line in imports(name, path, modules):
            if target != name and target in modules:
                edges.setdefault(target, line)
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """One circle of imports in each strongly connected group of modules (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(graph[succ])))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.add(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        groups.append(group)
    return [_circle(graph, min(group), group) for group in groups]


def _circle(graph: dict[str, dict[str, int]], start: str, group: set[str]) -> list[str]:
    """The shortest path from `start` back to itself through `group` (breadth first)."""
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for succ in graph[node]:
                if succ == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if succ in group and succ not in came_from:
                    came_from[succ] = node
                    following.append(succ)
        frontier = following
    raise AssertionError(f"no circle through {start}")


def test_the_table_names_every_top_level_module_once():
    table = layer_table()
    present = {layer_of(name) for name in source_modules()}
    assert len(table) == len(set(table)), f"named twice in the table: {sorted(n for n in table if table.count(n) > 1)}"
    assert not present - set(table), f"not in {ARCHITECTURE.name}'s layer table: {sorted(present - set(table))}"
    assert not set(table) - present, f"in the layer table but not in src/weightkit: {sorted(set(table) - present)}"


def test_no_import_runs_up_the_table():
    rank = {name: i for i, name in enumerate(layer_table())}
    paths = source_modules()
    upward = []
    for module, targets in import_graph().items():
        for target, line in targets.items():
            if rank[layer_of(target)] > rank[layer_of(module)]:
                where = paths[module].relative_to(REPO)
                upward.append(f"{where}:{line}: {module} imports {target}, which stands lower in the table")
    assert not upward, "\n".join(upward)


def test_no_import_circles():
    found = cycles(import_graph())
    assert not found, "\n".join(" -> ".join(circle) for circle in found)


def test_the_checks_catch_what_they_are_for():
    """The circle finder and the table reader on known input, so a passing suite means something."""
    graph = {"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1, "d": 1}, "d": {}}
    assert cycles(graph) == [["a", "b", "c", "a"]]
    assert layer_table()[0] != layer_table()[-1]
    assert layer_of("weightkit") == "weightkit"
    assert layer_of("weightkit.gguf.split") == "weightkit.gguf"
