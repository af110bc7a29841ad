"""The house rules of issue 31, held by tests (the layout's are in ``test_layout``):

- layers that show: nothing in ``pipeline/`` or ``documents/`` imports ``integrations/``,
  which holds only adapters, and nothing in ``documents/`` imports ``pipeline/``;
- no function on the decision path (``pipeline/``) takes more than six positional
  parameters: a record or keyword-only arguments instead;
- no module imports another module's private name;
- no backslash continuation in the package: brackets say where a line goes on.

Read from the source with ``ast`` and ``tokenize``; nothing is imported.
"""

from __future__ import annotations

import ast
import io
import tokenize

import pytest

from .test_layout import DECISION_PATH, PACKAGE, REPO, import_graph, relative

POSITIONAL_PARAMETERS = 6
SOURCES = sorted((REPO / PACKAGE).rglob("*.py"))


def test_nothing_the_pipeline_needs_is_an_adapter() -> None:
    below = (f"{PACKAGE}.pipeline", f"{PACKAGE}.documents")
    adapters = f"{PACKAGE}.integrations"
    wrong = [f"{edge.importer} imports {edge.imported} (line {edge.line})"
             for importer, edges in import_graph(REPO, PACKAGE).items()
             if importer.startswith(below)
             for edge in edges if edge.imported.startswith(adapters)]
    assert wrong == [], "\n".join(wrong)


def test_the_documents_are_below_the_pipeline() -> None:
    """The document model is what the pipeline runs on: it never reaches up into it."""
    wrong = [f"{edge.importer} imports {edge.imported} (line {edge.line})"
             for importer, edges in import_graph(REPO, PACKAGE).items()
             if importer.startswith(f"{PACKAGE}.documents")
             for edge in edges if edge.imported.startswith(f"{PACKAGE}.pipeline")]
    assert wrong == [], "\n".join(wrong)


def positional_parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    return [argument.arg for argument in (*node.args.posonlyargs, *node.args.args)
            if argument.arg not in ("self", "cls")]


def test_no_function_on_the_decision_path_takes_more_than_six_positional_parameters() -> None:
    too_many = [f"{relative(path)}:{node.lineno} {node.name}({', '.join(names)})"
                for path in sorted(DECISION_PATH.rglob("*.py"))
                for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                and len(names := positional_parameters(node)) > POSITIONAL_PARAMETERS]
    if too_many:
        pytest.fail("functions on the decision path with more than "
                    f"{POSITIONAL_PARAMETERS} positional parameters; pass a record or make "
                    "the rest keyword-only:\n  " + "\n  ".join(too_many), pytrace=False)


def test_no_module_imports_another_modules_private_name() -> None:
    private = [f"{relative(path)}:{node.lineno} {alias.name} from {node.module}"
               for path in SOURCES
               for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
               if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PACKAGE)
               for alias in node.names
               if alias.name.startswith("_") and not alias.name.startswith("__")]
    assert private == [], "make each public where it is defined:\n" + "\n".join(private)


def backslash_continuations(text: str) -> list[int]:
    """The lines a backslash continues (strings that span lines are not looked into)."""
    in_strings = set()
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.STRING:
            in_strings.update(range(token.start[0], token.end[0]))
    return [number for number, line in enumerate(text.splitlines(), start=1)
            if line.endswith("\\") and number not in in_strings]


def test_no_backslash_continues_a_line() -> None:
    found = [f"{relative(path)}:{number}" for path in SOURCES
             for number in backslash_continuations(path.read_text(encoding="utf-8"))]
    assert found == [], "use brackets instead:\n" + "\n".join(found)


def test_the_rules_see_what_they_should() -> None:
    assert backslash_continuations("x = 1 + \\\n    2\n") == [1]
    assert backslash_continuations('x = """a \\\nb"""\n') == []
    tree = ast.parse("def f(a, b, c, d, e, f, g, *, h): pass\ndef m(self, a): pass")
    functions = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
    assert [len(positional_parameters(node)) for node in functions] == [7, 1]
    assert len(SOURCES) > 100
