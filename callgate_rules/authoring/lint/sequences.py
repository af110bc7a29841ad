"""Sequence rules (an AccessPolicy's ``spec.sequences``): each ``where`` type-checked where
it is written, its variables known, its tools defined.

``after.where`` reads ``h``, the earlier call's history entry (``pipeline.history``'s
shape), beside the later call's variables; ``forbid.where`` / ``confirm.where`` read the
later call's variables. Both are checked against every later tool the rule names, as the
compiled rule runs there.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from callgate_rules.authoring.lint.cascade import broken
from callgate_rules.authoring.lint.expressions import BASE_VARIABLES, ExpressionPlace
from callgate_rules.authoring.lint.typecheck import located_finding, place_findings, variable_types
from callgate_rules.cel.errors import CelSyntaxError
from callgate_rules.cel.expression import compile_expression
from callgate_rules.cel.syntax import Node
from callgate_rules.documents.compiler import Compilation, Finding
from callgate_rules.documents.source import NodePath, SourceDocument
from callgate_rules.pipeline.history import ENTRY_TYPE


def check_sequences(compilation: Compilation) -> Iterator[Finding]:
    trees: dict[str, Node | None] = {}
    for source in compilation.sources:
        data = source.data
        if not (isinstance(data, Mapping) and data.get("kind") == "AccessPolicy"
                and isinstance(data.get("spec"), Mapping)):
            continue
        sequences = data["spec"].get("sequences")
        for index, item in enumerate(sequences if isinstance(sequences, list) else ()):
            if isinstance(item, Mapping):
                yield from _sequence_findings(compilation, source,
                                              ("spec", "sequences", index), item, trees)


def _sequence_findings(compilation: Compilation, source: SourceDocument, path: NodePath,
                       item: Mapping[str, Any], trees: dict[str, Node | None]
                       ) -> Iterator[Finding]:
    name = item.get("name", "?")
    effect = "forbid" if "forbid" in item else "confirm"
    after, later = item.get("after") or {}, item.get(effect) or {}
    cascade = broken(compilation)
    for key, tools in (("after", after.get("tools") or []), (effect, later.get("tools") or [])):
        for tool in tools:
            if (tool != "*" and tool not in compilation.contracts and
                    not cascade.may_define_tool(tool)):
                yield Finding(source.locate((*path, key, "tools")), "warning", "unknown-tool",
                              f"sequence {name}: no contract defines {tool!r}")
    later_tools = [c for c in compilation.contracts.values()
                   if "*" in (later.get("tools") or []) or c.name in (later.get("tools") or [])]
    for part, text, more in ((("after", "where"), after.get("where"), {"h"}),
                             ((effect, "where"), later.get("where"), set())):
        if not isinstance(text, str):
            continue
        try:  # without the named definitions: the checker then leaves calls by name alone
            expression = compile_expression(text)
        except CelSyntaxError:
            continue  # the compiler reported it where it is written
        said: set[tuple[str, str]] = set()
        for contract in later_tools:
            allowed = frozenset(BASE_VARIABLES | more | {lk.name for lk in contract.lookups})
            place = ExpressionPlace(contract.name, f"sequence {name} {'.'.join(part)}",
                                    expression, allowed, source, (*path, *part))
            for unknown in sorted(expression.variables - allowed):
                if (unknown, "") not in said and not cascade.may_define_name(unknown):
                    said.add((unknown, ""))
                    yield Finding(place.location, "error", "unknown-variable",
                                  f"{place.label}: {unknown!r} is not defined here; known: "
                                  f"{', '.join(sorted(allowed))}")
            types = {**variable_types(compilation, contract), "h": ENTRY_TYPE}
            for finding in place_findings(place, types, trees):
                if (finding.message, finding.code) not in said:
                    said.add((finding.message, finding.code))
                    yield located_finding(place, finding, place.label)
