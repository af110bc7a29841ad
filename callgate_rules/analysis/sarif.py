"""``callgate analyze --format sarif``: SARIF 2.1.0, one run, for CI annotations (GitHub
code scanning reads it).

Each result has a ``ruleId``, a ``level``, a message and the place a reviewer should look
at, relative to the current directory as ``callgate lint --format sarif`` gives it:

- ``diff``: each difference is a result ``OLD-to-NEW`` (``refused-to-execute``, ...) at
  the first rule whose verdict changed, in NEW where it is there (else OLD, else the
  tool's contract); a question left without an answer is ``unknown``;
- ``check``: each finding under its kind (``dead-rule``, ``unread-field``, ...) at its
  rule; each assertion not proved under ``assertion-broken``, ``assertion-unproved`` or
  ``assertion-unknown`` at the assertion's expression;
- both: each part not analysed is a ``note`` ``not-analysed`` at its rule.

A difference or a broken assertion is an ``error``, other findings ``warning``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from callgate_rules.analysis.assertions import AssertionResult
from callgate_rules.analysis.questions import CheckReport, ToolDiff
from callgate_rules.analysis.tool_model import NotAnalysed
from callgate_rules.authoring.lint.report import SARIF_SCHEMA, package_version
from callgate_rules.documents.model import GateConfig
from callgate_rules.errors import Location

PLACE = re.compile(r"^(?P<path>.+?):(?P<line>\d+):(?P<column>\d+)")
DESCRIPTIONS = {
    "not-analysed": "A part of a rule outside the subset the analysis encodes.",
    "unknown": "A question the solver did not answer in time.",
    "tool-added": "A tool only the new configuration has.",
    "tool-removed": "A tool only the old configuration has.",
    "dead-rule": "An enforced rule that can never fail on a call that reaches it.",
    "never-holds": "An enforced rule that can never hold.",
    "never-matches": "An allow rule no valid call matches.",
    "shadowed-allow": "An allow rule a deny rule shadows on every call.",
    "uncallable": "A tool no call can execute or await confirmation of.",
    "unread-field": "A field the configuration shows matters that no rule of a tool reads.",
    "assertion-broken": "A call the gate lets through breaks a PolicyAssertion.",
    "assertion-unproved": "A PolicyAssertion holds only if unencoded parts come out right.",
    "assertion-unknown": "A PolicyAssertion the solver did not prove or break in time.",
}


@dataclass(frozen=True)
class Result:
    rule_id: str
    level: str  # error, warning, note
    message: str
    location: Location


def place_of(text: str) -> Location:
    """The file, line and column at the start of a printed place."""
    found = PLACE.match(text)
    if found is None:
        return Location(text.split(" (", 1)[0])
    return Location(found["path"], int(found["line"]), int(found["column"]))


def rule_places(config: GateConfig) -> dict[str, Location]:
    """Every rule's printed name and its place."""
    places = {rule.qualified_name: rule.location for rule in config.policies.rules}
    for tool, contract in config.contracts.items():
        places.update({f"{tool}/{rule.name}": rule.location for rule in contract.rules})
        places.update({f"{lookup.name}.visible": lookup.location
                       for lookup in contract.lookups})
    return places


def diff_results(found: Sequence[ToolDiff], old: GateConfig, new: GateConfig) -> list[Result]:
    before, after = rule_places(old), rule_places(new)
    results: list[Result] = []
    for tool in found:
        contract = new.contracts.get(tool.tool) or old.contracts.get(tool.tool)
        home = contract.document.location if contract is not None else Location("")
        for item in tool.differences:
            names = [line.split(": ", 1)[0] for line in item.deciding]
            where = next((after.get(n) or before[n] for n in names
                          if n in after or n in before), home)
            condition = "" if item.definite else " (only if: " + "; ".join(item.conditions) + ")"
            results.append(Result(
                f"{item.old_route}-to-{item.new_route}", "error",
                f"{tool.tool}: a call OLD routes {item.old_route} and NEW routes "
                f"{item.new_route}{condition}: {item.call.arguments} as {item.call.actor}; "
                f"decided by {'; '.join(item.deciding) or 'the schemas'}", where))
        if tool.status in ("added", "removed"):
            side = "NEW" if tool.status == "added" else "OLD"
            results.append(Result(f"tool-{tool.status}", "warning",
                                  f"{tool.tool}: only {side} has this tool", home))
        results.extend(Result("unknown", "warning", f"{tool.tool}: {question}", home)
                       for question in tool.unknown)
        results.extend(_notes(tool.not_analysed))
    return results


def check_results(report: CheckReport, assertions: Sequence[AssertionResult],
                  config: GateConfig) -> list[Result]:
    results = [Result(f.kind, "warning", f.message, place_of(f.place))
               for f in report.findings]
    for question in report.unknown:  # "<tool>: <question>: timeout"
        contract = config.contracts.get(question.split(":", 1)[0])
        results.append(Result("unknown", "warning", question,
                              contract.document.location if contract else Location("")))
    for item in assertions:
        if item.status == "holds":
            continue
        rules = f"; rules: {'; '.join(item.rules)}" if item.rules else ""
        call = (f": {item.call.arguments} as {item.call.actor}"
                if item.call is not None else "")
        results.append(Result(f"assertion-{item.status}",
                              "error" if item.status == "broken" else "warning",
                              f"{item.message}{call}{rules}", place_of(item.place)))
    notes = dict.fromkeys([*report.not_analysed, *(n for a in assertions
                                                   for n in a.not_analysed)])
    results.extend(_notes(list(notes)))
    return results


def _notes(notes: Iterable[NotAnalysed]) -> list[Result]:
    """One note per part not analysed; the place inside the expression stays in the
    message (the file's place is the result's location)."""
    results: list[Result] = []
    for note in notes:
        inside = note.place.partition(" (expression ")[2]
        detail = f" (expression {inside}" if inside else ""
        results.append(Result("not-analysed", "note",
                              f"not analysed: {note.what} in {note.subject}{detail}",
                              place_of(note.place)))
    return results


def sarif_log(results: Sequence[Result], path_of: Callable[[str], str],
              text_of: Callable[[str], str] = str) -> dict[str, Any]:
    """The SARIF log; ``path_of`` turns a place's path into the URI shown (relative),
    ``text_of`` a message into the text shown (a ref's places named by the ref). The same
    part not analysed in OLD and NEW is one result."""
    seen: set[str] = set()
    unique: list[Result] = []
    for result in results:
        key = json.dumps(_result(result, 0, path_of, text_of), sort_keys=True)
        if key not in seen:
            seen.add(key)
            unique.append(result)
    results = unique
    codes = sorted({r.rule_id for r in results})
    index = {code: number for number, code in enumerate(codes)}
    rules = [{"id": code, "shortDescription": {"text": DESCRIPTIONS.get(
        code, f"A call routed {code.replace('-to-', ' before and ')} now.")}}
        for code in codes]
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "callgate analyze", "version": package_version(),
                                "rules": rules}},
            "columnKind": "unicodeCodePoints",
            "results": [_result(r, index[r.rule_id], path_of, text_of) for r in results],
        }],
    }


def _result(result: Result, rule_index: int, path_of: Callable[[str], str],
            text_of: Callable[[str], str]) -> dict[str, Any]:
    shown: dict[str, Any] = {"ruleId": result.rule_id, "ruleIndex": rule_index,
                             "level": result.level,
                             "message": {"text": text_of(result.message)}}
    if not result.location.path:  # nowhere to point at: a result without a location
        return shown
    physical: dict[str, Any] = {
        "artifactLocation": {"uri": quote(path_of(result.location.path))}}
    if result.location.line:
        physical["region"] = {"startLine": result.location.line,
                              "startColumn": max(result.location.column, 1)}
    return {**shown, "locations": [{"physicalLocation": physical}]}
