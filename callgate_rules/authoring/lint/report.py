"""How findings reach a person, a CI log or a code-scanning tab: text lines, JSON, GitHub
Actions annotations, a SARIF 2.1.0 log."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import quote

from callgate_rules.documents.compiler import Finding

FORMATS = ("text", "json", "github", "sarif")


SARIF_SCHEMA = ("https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/"
                "sarif-schema-2.1.0.json")


# A finding's severity as SARIF's result level.
SARIF_LEVELS: Mapping[str, str] = {"error": "error", "warning": "warning", "note": "note"}


# One line per finding code: SARIF's rule descriptions, shown by code-scanning tools.
CODE_DESCRIPTIONS: Mapping[str, str] = {
    "yaml": "The file is not valid YAML.",
    "schema": "The document does not match the JSON Schema of its kind.",
    "cel-syntax": "A CEL expression does not parse.",
    "cel-compile": "A CEL expression parses but cannot be compiled.",
    "definition": "A named definition is not sound (a cycle, a reserved name, wrong arity).",
    "unused-definition": "A named definition no rule uses.",
    "regex": "A pattern RE2 cannot match in linear time (a backreference, a lookaround, ...).",
    "duplicate-tool": "Two ToolContracts define the same tool.",
    "duplicate-actor-schema": "More than one AccessPolicy declares the actor schema.",
    "duplicate-session-schema": "More than one AccessPolicy declares the session schema.",
    "duplicate-routing-table": "More than one RoutingTable; a gate uses exactly one.",
    "unknown-variable": "An expression reads a variable that is not defined where it runs.",
    "unknown-tool": "An access rule names a tool that no contract defines.",
    "unknown-field": "An expression reads a field its schema does not declare.",
    "unknown-function": "An expression calls a function or method CEL does not have.",
    "no-overload": "A function exists, but not for the types of these arguments.",
    "wrong-arity": "A function is called with a number of arguments it does not take.",
    "cel-cost": "An expression's estimated worst-case cost is over the configured limit.",
    "not-a-condition": "A condition (a rule, when, &&, ||) is not a bool.",
    "impossible-comparison": "A comparison can never be true for the declared types.",
    "yaml-bare-key": "A flow mapping's comma made the text after it a key of its own.",
    "null-property": "A key under a schema's properties has no schema (a null value).",
    "undeclared-schema": "Fields are read from a variable no schema declares (a note).",
    "unguarded-optional-field": "An optional field is read without has().",
    "no-routing-table": "No RoutingTable: the built-in routes and budgets apply.",
    "missing-route": "An error class has no route in the RoutingTable.",
    "example-invalid": "A contract's example fails the contract itself.",
    "max-records": "max_records on a look-up that binds one record (not many: list).",
    "approval-covers": "approval_covers on what never asks a person (not a confirmation).",
    "approval-covers-path": "An approval_covers path names no argument, or a masked one.",
    "forbidden-leak": "A refusal's message could reveal that a record exists.",
    "unnarrowed-lookup": "A look-up's records reach the rules whatever the actor may see.",
    "no-allow-rule": "No allow rule names the tool, so every call is denied.",
    "unknown-placeholder": "A message placeholder names no variable.",
    "unknown-placeholder-field": "A message placeholder reads a field its schema does not have.",
    "missing-test-file": "A PolicyTest names an actor, world, session or conversation file "
                         "that is not there.",
    "never-fires": "A rule's condition is constant, so the rule never takes effect.",
    "always-refuses": "A business rule is always false, so it refuses every call.",
    "shadowed-rule": "An earlier, identical rule always decides first.",
    "allow-always-denied": "An unconditional deny beats this allow rule on every call.",
    "outcome-needs-person": "A write whose unknown outcome can only be settled by a person.",
    "forbidden-route": "A forbidden outcome is routed to something other than refuse or review.",
    "version-not-bumped": "A document changed but its metadata.version did not increase.",
    "version-decreased": "A document's metadata.version is lower than before.",
    "narrowed-arguments": "A contract's arguments now refuse calls that passed before.",
    "removed-tool": "A tool the model may still call was removed.",
}


def render(findings: Iterable[Finding], output_format: str) -> str:
    """The findings as ``output_format`` (one of ``FORMATS``), ready to print."""
    findings = list(findings)
    if output_format == "json":
        return json.dumps([f.as_dict() for f in findings], indent=2)
    if output_format == "github":
        return "\n".join(github_annotation(f) for f in findings)
    if output_format == "sarif":
        return json.dumps(sarif_log(findings), indent=2, ensure_ascii=False)
    return "\n".join(str(f) for f in findings)


def github_annotation(finding: Finding) -> str:
    """A GitHub Actions workflow command: the finding appears on the line in the diff."""
    properties = [f"file={_escape_property(relative_path(finding.location.path))}"]
    if finding.location.line:
        properties += [f"line={finding.location.line}", f"col={finding.location.column}"]
    properties.append(f"title={_escape_property(finding.code)}")
    command = "notice" if finding.severity == "note" else finding.severity
    return f"::{command} {','.join(properties)}::{_escape_data(finding.message)}"


def _escape_data(text: str) -> str:
    # The escaping GitHub's runner undoes (toolkit's escapeData); % first, or it would
    # re-escape the others.
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def sarif_log(findings: Iterable[Finding]) -> dict[str, Any]:
    """A SARIF 2.1.0 log with one run: one reporting rule per finding code."""
    findings = list(findings)
    codes = sorted({f.code for f in findings})
    rule_index = {code: index for index, code in enumerate(codes)}
    rules = [{"id": code, "shortDescription": {"text": CODE_DESCRIPTIONS.get(
        code, f"callgate lint finding {code}.")}} for code in codes]
    results = [_sarif_result(f, rule_index[f.code]) for f in findings]
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "callgate", "version": package_version(),
                                "rules": rules}},
            # PyYAML counts columns in code points, not SARIF's default UTF-16 units.
            "columnKind": "unicodeCodePoints",
            "results": results,
        }],
    }


def _sarif_result(finding: Finding, rule_index: int) -> dict[str, Any]:
    physical: dict[str, Any] = {
        "artifactLocation": {"uri": quote(relative_path(finding.location.path))}}
    if finding.location.line:
        region = {"startLine": finding.location.line}
        if finding.location.column:
            region["startColumn"] = finding.location.column
        physical["region"] = region
    return {
        "ruleId": finding.code,
        "ruleIndex": rule_index,
        "level": SARIF_LEVELS.get(finding.severity, "warning"),
        "message": {"text": finding.message},
        "locations": [{"physicalLocation": physical}],
    }


def relative_path(path: str) -> str:
    """``path`` relative to the current directory with ``/`` separators, as GitHub and SARIF
    viewers resolve it against the checkout."""
    try:
        return Path(os.path.relpath(path)).as_posix()
    except ValueError:  # another drive on Windows: there is no relative path
        return Path(path).as_posix()


def package_version() -> str:
    try:
        return metadata.version("callgate-rules")
    except metadata.PackageNotFoundError:
        return "0+unknown"
