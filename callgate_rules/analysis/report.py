"""``callgate analyze`` results as text, JSON, and PolicyTest cases a person can paste."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import yaml

from callgate_rules.analysis.questions import Call, CheckReport, Difference, ToolDiff

# the route a PolicyTest expects for each of the analysis's outcomes: a policy test runs
# the call through the simulator, where an executed call returns its result
EXPECTED = {"execute": "return_result", "await_confirmation": "await_confirmation"}


def policy_test_case(difference: Difference) -> dict[str, Any]:
    """A PolicyTest case (``policies/tests/``) that pins NEW's verdict on the call."""
    call = difference.call
    case: dict[str, Any] = {
        "name": f"{call.tool}: {difference.old_route} before, {difference.new_route} now",
        "actor": call.actor,
        "world": call.world,
        "propose": {"name": call.tool, "arguments": call.arguments},
    }
    if call.session:
        case["session"] = call.session
    if difference.gate_new is not None:  # what NEW's gate decides, route and rule
        route, rule = difference.gate_new
        case["expect"] = {"route": EXPECTED.get(route, route), "rule": rule}
    elif difference.new_route in EXPECTED:
        case["expect"] = {"route": EXPECTED[difference.new_route]}
    else:  # refused: the exact route depends on the deciding rule's error class
        case["description"] = "NEW refuses this call (the route depends on the deciding rule)"
        case["expect"] = {"writes": 0}
    return case


def _case_yaml(difference: Difference) -> str:
    text = yaml.safe_dump([policy_test_case(difference)], sort_keys=False,
                          default_flow_style=None, width=100, allow_unicode=True)
    return "\n".join("      " + line for line in text.rstrip().splitlines())


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
            lines.append(_case_yaml(item))
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


def check_text(report: CheckReport) -> str:
    lines = [f"{f.place}: {f.kind}: {f.message}" for f in report.findings]
    lines += [f"unknown: {question}" for question in report.unknown]
    lines += [f"not analysed: {n.what} at {n.place}" for n in report.not_analysed]
    if not report.findings:
        lines.insert(0, "no findings")
    return "\n".join(lines)


def check_json(report: CheckReport) -> str:
    return json.dumps(dataclasses.asdict(report), indent=2, default=str)


def call_summary(call: Call) -> str:
    return json.dumps(dataclasses.asdict(call))
