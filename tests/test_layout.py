"""The house plan of issue 12, held by tests: what a newcomer can rely on in the layout.

- no module of ``callgate_rules`` over 600 lines;
- no import cycle inside the package, lazy imports (inside functions) included;
- the ``Gate`` class (``callgate_rules/pipeline/gate.py``) at most 350 lines;
- no function over 60 lines in ``callgate_rules/pipeline/`` (the decision path).

Sizes are counted as the issue measured them: a module by its lines, a class or function
from its ``def``/``class`` line to its last line (docstring included, decorators not).
Everything is read from the source with ``ast``; nothing is imported.

How the import graph counts
---------------------------
A node is a module of the package; a package is the node of its ``__init__.py``.

- ``import a.b.c`` depends on the module ``a.b.c``; ``from a.b import c`` on ``a.b.c`` when
  that is a module, else (``c`` is a name) on the package ``a.b``. Relative imports resolve
  the same way from the importer's package.
- Imports anywhere count, inside functions too: a lazy import hides a cycle from Python's
  import machinery, not from the design. Imports under ``if TYPE_CHECKING:`` do not count
  (they never run); their ``else:`` branch does.
- Reaching ``a.b.c`` runs the ``__init__`` of each package on the way, so the import also
  depends on those packages, but only on the ones it *enters*: packages the importer does
  not itself live in. The packages holding the importer are initialised before it runs, so
  an edge to them says nothing, and counting it would make every package whose
  ``__init__`` imports its own submodules a cycle (and every module part of one through the
  root ``callgate_rules/__init__``, the public facade that imports everything). An import
  of the facade itself (``from callgate_rules import Gate``) is an ordinary dependency on
  it and does count.
- An import of the importer itself (a package's ``__init__`` naming its own package) is no
  dependency.
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = "callgate_rules"
MODULE_LINES = 600
GATE_CLASS_LINES = 350
DECISION_PATH = REPO / PACKAGE / "pipeline"
DECISION_PATH_FUNCTION_LINES = 60


# The import graph ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Import:
    """One dependency of ``importer`` on ``imported``, and where the source says so."""

    importer: str
    imported: str
    line: int
    how: str  # "", "lazy, in f()", or "entering package a.b to reach a.b.c"

    def describe(self) -> str:
        note = f", {self.how}" if self.how else ""
        return f"{self.importer} → {self.imported}  (line {self.line}{note})"


def module_names(root: Path, package: str) -> dict[str, Path]:
    """Every module under ``root / package`` by dotted name (a package by its own name)."""
    modules: dict[str, Path] = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def is_package(modules: dict[str, Path], name: str) -> bool:
    return modules[name].name == "__init__.py"


class _ImportCollector(ast.NodeVisitor):
    """The imports a module runs, each with the function it sits in (if any)."""

    def __init__(self) -> None:
        self.found: list[tuple[ast.Import | ast.ImportFrom, str | None]] = []
        self.functions: list[str] = []

    def visit_Import(self, node: ast.Import) -> None:
        self.found.append((node, self.functions[-1] if self.functions else None))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        self.found.append((node, self.functions[-1] if self.functions else None))

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.functions.append(node.name)
        self.generic_visit(node)
        self.functions.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            for statement in node.orelse:
                self.visit(statement)
        else:
            self.generic_visit(node)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _targets(
    node: ast.Import | ast.ImportFrom, importer: str, modules: dict[str, Path]
) -> Iterator[str]:
    """The modules of the package an import statement names (before entered packages)."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            name = alias.name
            while name and name not in modules:  # ``import a.b`` of a non-module: its package
                name = name.rpartition(".")[0]
            if name:
                yield name
        return
    base = node.module or ""
    if node.level:
        package = importer if is_package(modules, importer) else importer.rpartition(".")[0]
        anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
        base = ".".join([*anchor, *([base] if base else [])])
    for alias in node.names:
        submodule = f"{base}.{alias.name}"
        if submodule in modules:
            yield submodule
        elif base in modules:
            yield base


def _entered_packages(importer: str, imported: str, modules: dict[str, Path]) -> Iterator[str]:
    """The packages whose ``__init__`` runs on the way to ``imported`` and that do not hold
    ``importer`` (those are initialised before the importer runs)."""
    home = importer if is_package(modules, importer) else importer.rpartition(".")[0]
    home_chain = {".".join(home.split(".")[:depth]) for depth in range(1, home.count(".") + 2)}
    parts = imported.split(".")
    for depth in range(1, len(parts)):
        package = ".".join(parts[:depth])
        if package in modules and package not in home_chain:
            yield package


def imports_of(importer: str, modules: dict[str, Path]) -> list[Import]:
    """Every dependency of ``importer`` on another module of the package."""
    tree = ast.parse(modules[importer].read_text(encoding="utf-8"), str(modules[importer]))
    collector = _ImportCollector()
    collector.visit(tree)
    found: list[Import] = []
    for node, function in collector.found:
        lazy = f"lazy, in {function}()" if function else ""
        for target in _targets(node, importer, modules):
            for package in _entered_packages(importer, target, modules):
                entering = f"entering package {package} to reach {target}"
                found.append(Import(importer, package, node.lineno,
                                    f"{lazy}; {entering}" if lazy else entering))
            found.append(Import(importer, target, node.lineno, lazy))
    return [edge for edge in found if edge.imported != importer]


def import_graph(root: Path, package: str) -> dict[str, list[Import]]:
    modules = module_names(root, package)
    return {name: imports_of(name, modules) for name in modules}


def cycles(graph: dict[str, list[Import]]) -> list[list[Import]]:
    """One shortest cycle per strongly connected component of more than one module."""
    found = []
    for component in _strongly_connected(graph):
        if len(component) > 1:
            found.append(_shortest_cycle(graph, component))
    return found


def _strongly_connected(graph: dict[str, list[Import]]) -> list[set[str]]:
    """Tarjan's algorithm, iterative (the package is deep enough to matter for recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, Iterator[Import]]] = [(start, iter(graph[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            edge = next(edges, None)
            if edge is not None:
                target = edge.imported
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(graph[target])))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component: set[str] = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                components.append(component)
    return components


def _shortest_cycle(graph: dict[str, list[Import]], component: set[str]) -> list[Import]:
    """The shortest chain of imports from the component's first module back to itself."""
    start = min(component)
    came_by: dict[str, Import] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for edge in graph[node]:
            if edge.imported not in component:
                continue
            if edge.imported == start:
                chain = [edge]
                while chain[0].importer != start:
                    chain.insert(0, came_by[chain[0].importer])
                return chain
            if edge.imported not in came_by:
                came_by[edge.imported] = edge
                queue.append(edge.imported)
    raise AssertionError(f"{sorted(component)} is strongly connected but has no cycle")


def format_cycle(chain: list[Import]) -> str:
    names = " → ".join([chain[0].importer, *(edge.imported for edge in chain)])
    return "\n".join([names, *(f"    {edge.describe()}" for edge in chain)])


# Sizes -----------------------------------------------------------------------------------------


def definitions(path: Path) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef
                                               | ast.ClassDef]]:
    """Every class and function of a module, methods and nested ones included, each with its
    qualified name (``Gate.check``, ``lane.emit``) for readable messages."""

    def walk(node: ast.AST, prefix: str) -> Iterator[tuple[str, Any]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                yield f"{prefix}{child.name}", child
                yield from walk(child, f"{prefix}{child.name}.")
            else:
                yield from walk(child, prefix)

    yield from walk(ast.parse(path.read_text(encoding="utf-8"), str(path)), "")


def lines_of(node: ast.stmt) -> int:
    assert node.end_lineno is not None
    return node.end_lineno - node.lineno + 1


def relative(path: Path) -> str:
    return str(path.relative_to(REPO))


# The house plan --------------------------------------------------------------------------------


def test_no_module_is_over_600_lines() -> None:
    sizes = [(len(path.read_text(encoding="utf-8").splitlines()), relative(path))
             for path in (REPO / PACKAGE).rglob("*.py")]
    too_long = sorted(((lines, path) for lines, path in sizes if lines > MODULE_LINES),
                      reverse=True)
    if too_long:
        pytest.fail(
            f"{len(too_long)} module(s) over {MODULE_LINES} lines; split each along its seams "
            "into modules that hold one thing each, named for it:\n"
            + "\n".join(f"  {path}: {lines} lines" for lines, path in too_long),
            pytrace=False,
        )


def test_the_package_has_no_import_cycle() -> None:
    found = cycles(import_graph(REPO, PACKAGE))
    if found:
        pytest.fail(
            f"{len(found)} import cycle(s) inside {PACKAGE} (lazy imports count). Break each: "
            "move what both sides need into a module both may import (as CEL's exceptions "
            "live in cel/errors.py), or turn the dependency around; importing inside a "
            "function does not break a cycle:\n" + "\n".join(map(format_cycle, found)),
            pytrace=False,
        )


def test_the_gate_class_is_at_most_350_lines() -> None:
    path = REPO / PACKAGE / "pipeline" / "gate.py"
    gates = [node for name, node in definitions(path)
             if isinstance(node, ast.ClassDef) and name == "Gate"]
    assert gates, f"no class Gate in {relative(path)}: the test expects the Gate class there"
    lines = lines_of(gates[0])
    if lines > GATE_CLASS_LINES:
        pytest.fail(
            f"the Gate class ({relative(path)}:{gates[0].lineno}) is {lines} lines, at most "
            f"{GATE_CLASS_LINES}: keep in it the bindings, the flows of check and handle, and "
            "confirm; move the rest to the step it belongs to",
            pytrace=False,
        )


def test_no_function_on_the_decision_path_is_over_60_lines() -> None:
    too_long = sorted(
        ((lines_of(node), f"{relative(path)}:{node.lineno} {name}")
         for path in sorted(DECISION_PATH.rglob("*.py"))
         for name, node in definitions(path)
         if not isinstance(node, ast.ClassDef)
         and lines_of(node) > DECISION_PATH_FUNCTION_LINES),
        reverse=True,
    )
    if too_long:
        pytest.fail(
            f"{len(too_long)} function(s) over {DECISION_PATH_FUNCTION_LINES} lines on the "
            f"decision path ({relative(DECISION_PATH)}/); split each into named steps a "
            "reader can follow top to bottom:\n"
            + "\n".join(f"  {where}: {lines} lines" for lines, where in too_long),
            pytrace=False,
        )


# The rules above read the real package: these keep them from passing by reading nothing --------


def test_the_import_graph_sees_the_whole_package() -> None:
    graph = import_graph(REPO, PACKAGE)
    assert len(graph) >= 40
    assert f"{PACKAGE}.pipeline.gate" in graph and f"{PACKAGE}.cel.expression" in graph
    imported = {edge.imported for edges in graph.values() for edge in edges}
    assert f"{PACKAGE}.cel.compiler" in imported and f"{PACKAGE}.errors" in imported


def test_the_decision_path_and_the_gate_are_where_the_rules_look() -> None:
    assert len(list(DECISION_PATH.rglob("*.py"))) >= 7
    assert (REPO / PACKAGE / "pipeline" / "gate.py").is_file()


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def _cycle_names(root: Path) -> list[list[str]]:
    return [[chain[0].importer, *(edge.imported for edge in chain)]
            for chain in cycles(import_graph(root, "pkg"))]


def test_a_lazy_import_closes_a_cycle_and_a_type_checking_import_does_not(
    tmp_path: Path,
) -> None:
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from pkg.b import value\n",
        "pkg/b.py": "value = 1\n\ndef later():\n    from pkg import a\n    return a\n",
        "pkg/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import d\n",
        "pkg/d.py": "import pkg.c\n",
    })
    assert _cycle_names(tmp_path) == [["pkg.a", "pkg.b", "pkg.a"]]
    chain = cycles(import_graph(tmp_path, "pkg"))[0]
    assert "lazy, in later()" in format_cycle(chain)


def test_entering_a_package_runs_its_init_but_a_package_importing_its_own_parts_is_no_cycle(
    tmp_path: Path,
) -> None:
    _write(tmp_path, {
        # The facade imports everything, and its own package's parts import one another:
        # no cycles.
        "pkg/__init__.py": "from pkg.sub import helper\nfrom pkg.user import use\n",
        "pkg/sub/__init__.py": "from pkg.sub.helper import helper\n",
        "pkg/sub/helper.py": "from pkg.sub import other\n\ndef helper(): ...\n",
        "pkg/sub/other.py": "",
        "pkg/user.py": "from pkg.sub.other import *\n\ndef use(): ...\n",
    })
    assert _cycle_names(tmp_path) == []
    # ... until a part of sub reaches a module that enters sub from outside: user reaches
    # sub.other through sub's __init__, which imports helper, which now imports user.
    _write(tmp_path, {"pkg/sub/helper.py": "from pkg import user\n\ndef helper(): ...\n"})
    assert _cycle_names(tmp_path) == [["pkg.sub", "pkg.sub.helper", "pkg.user", "pkg.sub"]]
    # and importing the facade from inside the package is a dependency on everything in it
    _write(tmp_path, {
        "pkg/sub/helper.py": "def helper(): ...\n",
        "pkg/sub/other.py": "from pkg import use\n",
    })
    assert _cycle_names(tmp_path) == [["pkg", "pkg.user", "pkg.sub.other", "pkg"]]


@pytest.mark.parametrize("statement,expected", [
    ("import pkg.sub.other", ["pkg.sub", "pkg.sub.other"]),
    ("from pkg.sub import other", ["pkg.sub", "pkg.sub.other"]),
    ("from pkg.sub import name", ["pkg.sub"]),
    ("from .sub.other import name", ["pkg.sub", "pkg.sub.other"]),
    ("from . import sub", ["pkg.sub"]),
])
def test_an_import_is_resolved_to_the_modules_it_runs(
    tmp_path: Path, statement: str, expected: list[str]
) -> None:
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/sub/__init__.py": "",
        "pkg/sub/other.py": "",
        "pkg/user.py": statement + "\n",
    })
    edges = imports_of("pkg.user", module_names(tmp_path, "pkg"))
    assert sorted({edge.imported for edge in edges}) == expected
