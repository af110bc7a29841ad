"""``callgate analyze`` results as text, JSON, and PolicyTest cases a person can paste."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

import yaml

from callgate_rules.analysis.assertions import AssertionResult
from callgate_rules.analysis.questions import Call, CheckReport, Difference, Finding, ToolDiff

# the route a PolicyTest expects for each of the analysis's outcomes: a policy test runs
# the call through the simulator, where an executed call returns its result
EXPECTED = {"execute": "return_result", "await_confirmation": "await_confirmation"}


def policy_test_case(difference: Difference) -> dict[str, Any]:
    """A PolicyTest case (``policies/tests/``) that pins NEW's verdict on the call."""
    call = difference.call
    return call_case(call, f"{call.tool}: {difference.old_route} before, "
                     f"{difference.new_route} now", difference.new_route, difference.gate_new,
                     "NEW refuses this call (the route depends on the deciding rule)")


def call_case(call: Call, name: str, route: str, gate: tuple[str, str | None] | None,
              refused: str = "") -> dict[str, Any]:
    """A PolicyTest case that proposes ``call`` and expects what the gate decides on it
    (``gate``, route and rule), else the analysis's ``route``."""
    case: dict[str, Any] = {
        "name": name,
        "actor": call.actor,
        "world": call.world,
        "propose": {"name": call.tool, "arguments": call.arguments},
    }
    if call.session:
        case["session"] = call.session
    if gate is not None:  # what the gate decides, route and rule
        decided, rule = gate
        case["expect"] = {"route": EXPECTED.get(decided, decided), "rule": rule}
    elif route in EXPECTED:
        case["expect"] = {"route": EXPECTED[route]}
    else:  # refused: the exact route depends on the deciding rule's error class
        case["description"] = refused
        case["expect"] = {"writes": 0}
    return case


def _case_yaml(case: dict[str, Any], indent: str = "      ") -> str:
    text = yaml.safe_dump([case], sort_keys=False, default_flow_style=None, width=100,
                          allow_unicode=True)
    return "\n".join(indent + line for line in text.rstrip().splitlines())


def diff_text(results: list[ToolDiff]) -> str:
    lines: list[str] = []
    for tool in results:
        lines.append(f"{tool.tool}: {tool.status}")
        for item in tool.differences:
            kind = "" if item.definite else " (conditional)"
            lines.append(f"  {item.old_route} in OLD → {item.new_route} in NEW{kind}")
            lines.append("    call: " + json.dumps(dataclasses.asdict(item.call)["arguments"]))
            lines.append("    actor: " + json.dumps(item.call.actor))
            if item.call.world:
                lines.append("    records: " + json.dumps(item.call.world))
            if not item.call.valid:
                lines.append("    note: the values may not pass a schema keyword the "
                             "analysis does not encode (pattern, format)")
            for rule in item.deciding:
                lines.append(f"    decided by {rule}")
            if item.gate_old is not None and item.gate_new is not None:
                state = ("confirmed" if item.confirmed else
                         "the conditions below are not set up by it" if not item.definite
                         else "DISAGREES with the analysis: please report it")
                lines.append(f"    Gate.check: {item.gate_old[0]} in OLD, {item.gate_new[0]} "
                             f"in NEW ({state})")
            for condition in item.conditions:
                lines.append(f"    only if {condition}")
            lines.append("    as a policy test case:")
            lines.append(_case_yaml(policy_test_case(item)))
        for question in tool.unknown:
            lines.append(f"  unknown: {question}")
        for note in tool.not_analysed:
            lines.append(f"  not analysed: {note.what} at {note.place}")
    return "\n".join(lines)


def diff_json(results: list[ToolDiff]) -> str:
    payload = []
    for tool in results:
        entry = dataclasses.asdict(tool)
        for item, raw in zip(tool.differences, entry["differences"], strict=True):
            raw["policy_test_case"] = policy_test_case(item)
        payload.append(entry)
    return json.dumps({"tools": payload}, indent=2, default=str)


def check_text(report: CheckReport, assertions: Sequence[AssertionResult] = ()) -> str:
    lines: list[str] = []
    for finding in report.findings:
        lines.append(f"{finding.place}: {finding.kind}: {finding.message}")
        if finding.call is not None and finding.route is not None:
            lines.extend(_call_lines(finding.call, finding.route, finding.gate, "  "))
            lines.append("  as a policy test case:")
            lines.append(_case_yaml(finding_case(finding), "    "))
    for result in assertions:
        lines.append(f"{result.place}: assertion {result.status}: {result.message}")
        if result.call is not None and result.route is not None:
            lines.extend(_call_lines(result.call, result.route, None, "  "))
            for rule in result.rules:
                lines.append(f"  rule {rule}")
            if result.status == "broken" and result.gate is not None:
                state = ("confirmed" if result.confirmed
                         else "DISAGREES with the analysis: please report it")
                lines.append(f"  Gate.check: {result.gate[0]}, the assertion "
                             f"{_truth(result.holds_on_call)} on the call ({state})")
            for condition in result.conditions:
                lines.append(f"  only if {condition}")
            if result.status == "broken":
                lines.append("  as a policy test case:")
                lines.append(_case_yaml(assertion_case(result), "    "))
    if not report.findings and not any(r.status != "holds" for r in assertions):
        lines.insert(0, "no findings")
    lines += [f"unknown: {question}" for question in report.unknown]
    notes = dict.fromkeys([*report.not_analysed,
                           *(n for r in assertions for n in r.not_analysed)])
    lines += [f"not analysed: {n.what} at {n.place}" for n in notes]
    return "\n".join(lines)


def _truth(value: bool | None) -> str:
    return {True: "is true", False: "is false", None: "is an error"}[value]


def _call_lines(call: Call, route: str, gate: tuple[str, str | None] | None,
                indent: str) -> list[str]:
    lines = [f"{indent}call ({route}): " + json.dumps(call.arguments),
             f"{indent}actor: " + json.dumps(call.actor)]
    if call.session:
        lines.append(f"{indent}session: " + json.dumps(call.session))
    if call.world:
        lines.append(f"{indent}records: " + json.dumps(call.world))
    if gate is not None:
        lines.append(f"{indent}Gate.check: {gate[0]} (rule {gate[1]})")
    elif not call.valid:
        lines.append(f"{indent}note: the values may not pass a schema keyword the analysis "
                     "does not encode (pattern, format)")
    return lines


def finding_case(finding: Finding) -> dict[str, Any]:
    assert finding.call is not None and finding.route is not None
    return call_case(finding.call, f"{finding.tool}: {finding.kind} {finding.subject}",
                     finding.route, finding.gate)


def assertion_case(result: AssertionResult) -> dict[str, Any]:
    """The counterexample as a case that passes today (it expects what the gate decides);
    once the policy is fixed, change its ``expect`` to the refusal you want."""
    assert result.call is not None and result.route is not None
    case = call_case(result.call, f"{result.tool}: breaks {result.assertion}",
                     result.route, result.gate)
    case["description"] = (f"breaks the assertion {result.assertion} ({result.place}); "
                           "once the policy is fixed, expect the refusal instead")
    return case


def check_json(report: CheckReport, assertions: Sequence[AssertionResult] = ()) -> str:
    payload = dataclasses.asdict(report)
    for finding, raw in zip(report.findings, payload["findings"], strict=True):
        if finding.call is not None:
            raw["policy_test_case"] = finding_case(finding)
    payload["assertions"] = []
    for result in assertions:
        raw = dataclasses.asdict(result)
        if result.call is not None and result.status == "broken":
            raw["policy_test_case"] = assertion_case(result)
        payload["assertions"].append(raw)
    return json.dumps(payload, indent=2, default=str)


def call_summary(call: Call) -> str:
    return json.dumps(dataclasses.asdict(call))
