"""``callgate test``: policy test cases beside the policies, like ``opa test``.

A test file is a document of kind ``PolicyTest`` (the compiler skips it, so it can live in
``policies/`` next to what it tests)::

    apiVersion: callgate/v1
    kind: PolicyTest
    metadata: {name: follow-up-tests, description: What createFollowUp must decide}
    spec:
      actor: ../examples/actors/dana.yaml      # defaults for every case; paths are
      world: ../examples/world.yaml            # relative to this file
      now: "2026-11-29T12:00:00Z"
      cases:
        - name: another tenant's ticket
          propose: {name: createFollowUp, arguments: {ticketId: T-2001, ...}}
          expect: {route: refuse, error_class: forbidden, rule: default-deny, writes: 0,
                   agent_message_contains: "No ticket T-2001"}
        - name: a scripted sequence
          faults: {createFollowUp: {fail_before_sending: 1}}
          steps:                                # the scenario step format
            - propose: {...}
              expect: {...}

A case is a scenario (see ``scenarios.py``) with the file's defaults; ``propose`` plus
``expect`` is shorthand for one step. Coverage counts, per document, the business and
access rules no case made fire, and the routes and error classes no case produced — including
the ones the state machine passes through on the way (``retry``, ``reconcile``,
``transient``, ``unknown_outcome``), read from each decision's trace — out of those the
declared tools can produce at all (``reachable.py``); the rest are listed with the reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from callgate_rules.documents.model import GateConfig
from callgate_rules.documents.source import iter_yaml_files, parse_yaml_text, read_text
from callgate_rules.errors import InputError
from callgate_rules.harness.reachable import reachable
from callgate_rules.harness.scenarios import Scenario, ScenarioResult, scenario_of
from callgate_rules.taxonomy import ErrorClass, Route

CASE_KEYS = frozenset({"name", "description", "actor", "world", "now", "faults", "propose",
                       "steps", "expect", "session", "conversation", "destination", "results"})


def load_tests(paths: Iterable[str | Path]) -> list[Scenario]:
    """Every case of every PolicyTest document under ``paths``."""
    cases: list[Scenario] = []
    for file in iter_yaml_files([Path(p) for p in paths]):
        text = read_text(file)  # bounded: refused unread when too large
        if "PolicyTest" not in text:
            continue  # a contract or policy beside the tests: not ours to parse twice
        for document in parse_yaml_text(text, str(file)):
            data = document.data
            if not isinstance(data, dict) or data.get("kind") != "PolicyTest":
                continue
            spec = data.get("spec")
            if not isinstance(spec, dict) or not isinstance(spec.get("cases"), list):
                raise InputError(f"{document.locate(('spec',))}: a PolicyTest needs "
                                 "spec.cases, a list of cases")
            defaults = {k: spec[k] for k in ("actor", "world", "now", "faults", "session",
                                             "destination", "results") if k in spec}
            for index in range(len(spec["cases"])):
                cases.append(_case(document.sub(("spec", "cases", index)), file, defaults))
    return cases


def _case(document: Any, file: Path, defaults: Mapping[str, Any]) -> Scenario:
    data = document.data
    where = document.locate(())
    if not isinstance(data, dict) or "name" not in data:
        raise InputError(f"{where}: a test case needs a name")
    unknown = sorted(set(data) - CASE_KEYS)
    if unknown:
        raise InputError(f"{document.locate((unknown[0], '<key>'))}: unknown case field "
                         f"{unknown[0]!r}; known: {', '.join(sorted(CASE_KEYS))}")
    if ("propose" in data) == ("steps" in data):
        raise InputError(f"{where}: a test case needs either propose (one call) or steps "
                         "(a scripted sequence)")
    if "propose" in data:
        rest = {k: v for k, v in data.items() if k not in ("propose", "expect")}
        data = {**rest, "steps": [{"propose": data["propose"],
                                   "expect": data.get("expect", {})}]}
    return scenario_of(type(document)(document.path, data, document.places, document.index),
                     file, defaults)


_CLASS_NAMES = frozenset(str(error_class) for error_class in ErrorClass)


@dataclass
class Coverage:
    """What the cases exercised, per document, out of what the tools can produce at all.

    ``routes`` and ``error_classes`` hold the reachable ones (``reachable.py``) and any a
    case produced; ``left_out`` names each other one with the reason it cannot happen.
    """

    rules: dict[str, dict[str, bool]] = field(default_factory=dict)  # document → rule → fired
    routes: dict[str, bool] = field(default_factory=dict)
    error_classes: dict[str, bool] = field(default_factory=dict)
    routing_document: str = "RoutingTable (built-in defaults)"
    left_out: dict[str, str] = field(default_factory=dict)  # "route X" → why it cannot happen

    @property
    def covered(self) -> int:
        return (sum(sum(r.values()) for r in self.rules.values())
                + sum(self.routes.values()) + sum(self.error_classes.values()))

    @property
    def total(self) -> int:
        return (sum(len(r) for r in self.rules.values()) + len(self.routes)
                + len(self.error_classes))

    @property
    def percent(self) -> float:
        return 100.0 * self.covered / self.total if self.total else 100.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "percent": round(self.percent, 1),
            "documents": {
                **{doc: {"rules_not_exercised": sorted(n for n, hit in rules.items() if not hit),
                         "rules": len(rules)} for doc, rules in self.rules.items()},
                self.routing_document: {
                    "routes_not_produced": sorted(r for r, hit in self.routes.items() if not hit),
                    "error_classes_not_produced": sorted(
                        c for c, hit in self.error_classes.items() if not hit)},
            },
            "left_out": dict(sorted(self.left_out.items())),
        }

    def produced(self, kind: dict[str, bool], name: str) -> None:
        """A case produced ``name``: it counts, reachable or not."""
        kind[name] = True
        self.left_out.pop(f"{'route' if kind is self.routes else 'error class'} {name}", None)


def coverage(config: GateConfig, results: Iterable[ScenarioResult]) -> Coverage:
    report = Coverage()
    for contract in config.contracts.values():
        if contract.rules:
            report.rules[contract.document.key] = {rule.name: False for rule in contract.rules}
    for rule in config.policies.rules:
        report.rules.setdefault(rule.document.key, {})[rule.name] = False
    possible = reachable(config)
    report.routes = {str(route): False for route in Route if str(route) in possible.routes}
    report.error_classes = {str(error_class): False for error_class in ErrorClass
                            if str(error_class) in possible.error_classes}
    report.left_out = dict(possible.left_out)
    if config.routing.document is not None:
        report.routing_document = config.routing.document.key
    access_keys = {rule.qualified_name: (rule.document.key, rule.name)
                   for rule in config.policies.rules}
    for result in results:
        for step in result.steps:
            decision = step.decision
            report.produced(report.routes, str(decision.route))
            if decision.error_class is not None:
                report.produced(report.error_classes, str(decision.error_class))
            decided = config.contracts.get(decision.tool or "")
            for entry in decision.trace:
                if entry.step == "validate" and entry.subject.startswith("rule ") and decided:
                    fired = entry.result in ("fail", "error")
                    rules = report.rules.get(decided.document.key, {})
                    name = entry.subject.removeprefix("rule ")
                    if fired and name in rules:
                        rules[name] = True
                elif entry.step == "execute" and entry.subject == "send":
                    # the call passed the checks and went out: the execute route was taken
                    report.produced(report.routes, str(Route.EXECUTE))
                    head = entry.result.split(":")[0]
                    if head in _CLASS_NAMES:  # failed before or after sending
                        report.produced(report.error_classes, head)
                elif entry.step == "route" and entry.subject == "retry":
                    report.produced(report.routes, str(Route.RETRY))
                elif entry.step == "reconcile":
                    report.produced(report.routes, str(Route.RECONCILE))
                elif entry.step == "authorize" and entry.subject in access_keys:
                    if entry.result.split(" ")[0] in ("allow", "deny"):
                        document, name = access_keys[entry.subject]
                        report.rules[document][name] = True
    return report
