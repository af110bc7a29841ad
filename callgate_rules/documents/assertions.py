"""The ``PolicyAssertion`` document kind: properties every call the gate lets through must
have, in CEL. The gate never reads it (``compiler`` skips the kind); ``callgate analyze
check`` proves each assertion (``analysis.assertions``) and ``callgate lint`` reports what
is wrong with the documents — both read them here, against ``schemas/PolicyAssertion.json``,
with the configuration's definitions expanded.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from callgate_rules.cel.errors import CelSyntaxError
from callgate_rules.cel.expression import CompiledExpression, compile_expression
from callgate_rules.documents.compiler import Compilation
from callgate_rules.documents.definitions import located, shared_definitions
from callgate_rules.documents.findings import Finding, dotted, schema_error_messages
from callgate_rules.documents.validators import document_schema
from callgate_rules.errors import Location

KIND = "PolicyAssertion"


@dataclass(frozen=True)
class Assertion:
    name: str  # "<document>/<assertion>"
    tools: frozenset[str]  # tool names, or "*"
    expression: CompiledExpression
    place: Location  # where its expression is written


def read_assertions(compilation: Compilation,
                    tools: Collection[str] | None) -> tuple[list[Assertion], list[Finding]]:
    """The PolicyAssertions among the compilation's documents, and a finding (file, line,
    field) for each problem: the schema, CEL that does not parse, and — when ``tools`` is
    given — a tool no contract defines."""
    problems: list[Finding] = []
    found: list[Assertion] = []
    definitions = shared_definitions(located(compilation.sources)).definitions
    for source in compilation.sources:
        data = source.data
        if not isinstance(data, Mapping) or data.get("kind") != KIND:
            continue
        errors = list(document_schema(KIND).iter_errors(data))
        for error in errors:
            for path, message in schema_error_messages(error, source.written):
                problems.append(Finding(source.locate(path), "error", "schema", message))
        if errors:
            continue
        for index, item in enumerate(data["spec"]["assertions"]):
            path = ("spec", "assertions", index, "expression")
            try:
                compiled = compile_expression(item["expression"], definitions)
            except CelSyntaxError as error:
                problems.append(Finding(source.locate_in_scalar(path, error.line, error.column),
                                        "error", error.code, f"{dotted(path)}: {error}"))
                continue
            named = frozenset(item["tools"])
            name = f"{data['metadata']['name']}/{item['name']}"
            for tool in sorted(named - {"*"} - set(tools if tools is not None else named)):
                problems.append(Finding(source.locate(("spec", "assertions", index, "tools")),
                                        "error", "unknown-tool",
                                        f"assertion {name} names the tool {tool}, which no "
                                        "ToolContract defines"))
            found.append(Assertion(name, named, compiled, source.locate_in_scalar(path, 1, 1)))
    return found, problems
