"""The ``Definitions`` document kind: named CEL definitions every rule of the configuration
may use (``cel.definitions`` expands them into each rule's tree before it is compiled)::

    apiVersion: callgate/v1
    kind: Definitions
    metadata: {name: refund-tables, version: "1.0.0", owner: ..., description: ...}
    spec:
      definitions:
        max_refund: 500.0                          # a constant: any YAML number or boolean,
        fee_by_tier: {gold: 0.0, silver: 2.5}      #   list or mapping (a table) is one
        currency: '"EUR"'                          # a string is CEL, so a text is quoted
        within_limit(amount, tier): amount <= max_refund - fee_by_tier[tier]

A key with parameters is a function of them. Every ``Definitions`` document is read before
any rule is compiled, so their order among the files does not matter; a name is defined once
across them. Each definition is compiled once on its own, so an error in it is reported at
its own file:line:col whether or not a rule uses it; one no rule uses is a warning.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from callgate_rules.cel.definitions import Definition, Definitions, Problem
from callgate_rules.documents.findings import Finding
from callgate_rules.documents.source import SourceDocument

KIND = "Definitions"
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_KEY = re.compile(rf"\s*({_NAME})\s*(?:\((\s*(?:{_NAME}\s*(?:,\s*{_NAME}\s*)*)?)\))?\s*")


@dataclass
class SharedDefinitions:
    """The configuration's definitions, with where each was declared (for findings)."""

    definitions: Definitions
    places: Mapping[str, tuple[SourceDocument, str]] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)

    def unused(self, used: Iterable[str]) -> list[Finding]:
        """A warning for each definition no rule uses."""
        used = set(used)
        return [Finding(source.locate(("spec", "definitions", key, "<key>")), "warning",
                        "unused-definition", f"definition {key!r} is used by no rule; remove "
                        "it or use it")
                for name, (source, key) in sorted(self.places.items()) if name not in used]


def shared_definitions(sources: Iterable[SourceDocument]) -> SharedDefinitions:
    """Every definition of the ``Definitions`` documents (already valid against their
    schema), each checked; a finding at its place for each one that is not sound."""
    declared: list[Definition] = []
    places: dict[str, tuple[SourceDocument, str]] = {}
    findings: list[Finding] = []
    for source in sources:
        for key, value in source.data["spec"]["definitions"].items():
            match = _KEY.fullmatch(key)
            if match is None:
                findings.append(Finding(
                    source.locate(("spec", "definitions", key, "<key>")), "error",
                    "definition", f"definition {key!r}: write a name (letters, digits, _) "
                    "for a constant, or name(parameter, ...) for a function"))
                continue
            name, listed = match[1], match[2]
            parameters = None if listed is None else tuple(
                p.strip() for p in listed.split(",") if p.strip())
            declared.append(Definition(name, cel_text(value), parameters))
            places.setdefault(name, (source, key))
    definitions, problems = Definitions.of(declared)
    findings.extend(_finding(problem, places, declared) for problem in problems)
    return SharedDefinitions(definitions, places, findings)


def cel_text(value: Any) -> str:
    """A definition's value as CEL: a string is CEL already; a YAML number, boolean, list
    or mapping is the literal JSON writes, which CEL reads as the same value."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _finding(problem: Problem, places: Mapping[str, tuple[SourceDocument, str]],
             declared: list[Definition]) -> Finding:
    source, key = places[problem.name]
    path = ("spec", "definitions", key)
    written = isinstance(source.data["spec"]["definitions"][key], str)
    place = (source.locate_in_scalar(path, problem.line, problem.column) if written
        else source.locate(path))
    return Finding(place, "error", "definition", f"definitions.{key}: {problem.message}")


def located(sources: Iterable[SourceDocument]) -> list[SourceDocument]:
    """The ``Definitions`` documents among ``sources``."""
    return [source for source in sources
            if isinstance(source.data, Mapping) and source.data.get("kind") == KIND]
