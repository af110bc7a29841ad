"""A tool's plan decides exactly as the plain reference evaluator does.

Each tool's steps 3–4 are compiled into one generated function (its plan); the tests below
decide every call twice, once by the plan and once by ``reference_steps.ReferenceSteps``
(the same checks written plainly, check by check), and compare the two decisions field by
field: route, class, rule, messages, trace, warnings, log. The calls: every shipped
scenario and policy test, a configuration full of shadow modes and evaluation errors, and
calls made up by hypothesis. Counting how each call ended in the plan (allowed, a
rejection prepared when the plan was compiled, one made from the data) shows every kind
was exercised."""

from __future__ import annotations

import linecache
import traceback
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from callgate_rules.harness.policytest import load_tests
from callgate_rules.harness.scenarios import load_config_for, load_scenarios, run_scenarios
from callgate_rules.pipeline import plan
from callgate_rules.pipeline.decision import Decision
from callgate_rules.pipeline.gate import Gate
from tests.conftest import REPO

from .reference_steps import ReferenceSteps
from .test_steps import TINY_ACCESS, TINY_TOOLS, TINY_WORLD

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
LOG_FIELDS_THAT_VARY = ("ts", "elapsed_ms", "request_id")


def comparable(decision: Decision) -> dict[str, Any]:
    """Everything a decision says, but the clock readings and drawn IDs of its log."""
    fields = decision.as_dict()
    fields["log"] = {k: v for k, v in fields["log"].items() if k not in LOG_FIELDS_THAT_VARY}
    fields["confirmation_token"] = None  # signed over a fresh timestamp
    return fields


class Outcomes:
    """How each call ended in the plan; while ``reference`` is set, plans decide by the
    reference evaluator instead."""

    def __init__(self) -> None:
        self.reached: Counter[str] = Counter()
        self.reference = False


def label(outcome: Any) -> str:
    if type(outcome) is str:
        return "allowed"
    if outcome.prepare is not None:
        return f"prepared: {outcome.error_class}"
    return f"rejected: {outcome.error_class}"


@pytest.fixture
def both_ways(monkeypatch: pytest.MonkeyPatch) -> Iterator[Outcomes]:
    """Make every ``Gate.decide_steps`` decide by the plans and by the reference, and compare."""
    outcomes = Outcomes()
    original_init = plan.ToolPlan.__init__
    original_check = Gate.decide_steps

    def with_reference(self: plan.ToolPlan, config: Any, *args: Any) -> None:
        original_init(self, config, *args)
        generated = self.decide
        reference = ReferenceSteps(self, config.policies, config.routing.provenance)

        def decide(*call: Any) -> Any:
            if outcomes.reference:
                return reference(*call)
            outcome = generated(*call)
            outcomes.reached[label(outcome)] += 1
            return outcome

        self.decide = decide

    def checked_both_ways(self: Gate, *args: Any, **kwargs: Any) -> Any:
        outcomes.reference = True
        general, _ = original_check(self, *args, **kwargs)
        outcomes.reference = False
        decision, progress = original_check(self, *args, **kwargs)
        assert comparable(decision) == comparable(general)
        return decision, progress

    monkeypatch.setattr(plan.ToolPlan, "__init__", with_reference)
    monkeypatch.setattr(Gate, "decide_steps", checked_both_ways)
    yield outcomes


def test_every_scenario_and_policy_test_decides_alike(both_ways: Outcomes) -> None:
    config = load_config_for(str(REPO / "contracts"), str(REPO / "policies"))
    cases = [*load_scenarios([REPO / "examples" / "scenarios"]),
             *load_tests([REPO / "policies" / "tests"])]
    results = run_scenarios(cases, config)
    assert [r.failures for r in results if r.failures] == []
    ended = both_ways.reached
    # Calls of every kind: allowed, rejections prepared, rejections made from the data.
    assert ended["allowed"] >= 10
    assert ended["prepared: forbidden"] >= 1 and ended["prepared: invalid_argument"] >= 1
    assert ended["rejected: invalid_argument"] >= 1 and ended["rejected: ambiguous"] >= 1


@pytest.fixture
def tiny(tmp_path: Path, ref: Any, compile_gate: Any) -> Gate:
    ref.write(tmp_path / "tools.yaml", TINY_TOOLS)
    ref.write(tmp_path / "access.yaml", TINY_ACCESS)
    gate: Gate = compile_gate(tmp_path, world=TINY_WORLD)
    return gate


@pytest.mark.parametrize(("call", "ended"), [
    ({"name": "echo", "arguments": {"text": "hi"}}, "allowed"),
    ({"name": "echo", "arguments": {"text": "blocked"}}, "prepared: forbidden"),  # a deny
    ({"name": "echo", "arguments": {"text": 5}}, "rejected: invalid_argument"),  # the schema
    ({"name": "orphan", "arguments": {"text": "hi"}}, "prepared: forbidden"),  # by default
    ({"name": "strict", "arguments": {"ticketId": "T-1"}}, "rejected: conflict"),  # rule error
    ({"name": "strict", "arguments": {"ticketId": "T-9"}}, "rejected: not_found"),  # no record
    ({"name": "lenient-document", "arguments": {"ticketId": "T-1"}}, "allowed"),
    ({"name": "lenient-rule", "arguments": {"ticketId": "T-1"}}, "allowed"),
    ({"name": "shadowed", "arguments": {"text": "hi"}}, "allowed"),  # audit and warn
])
def test_shadow_modes_and_errors_decide_alike(both_ways: Outcomes, tiny: Gate,
                                              call: dict[str, Any], ended: str) -> None:
    tiny.check(call, actor={"id": "U-1", "tenant": "acme"}, now=NOW)
    assert both_ways.reached == {ended: 1}


SHADOWED_ACCESS = """\
apiVersion: callgate/v1
kind: ToolContract
metadata: {name: guarded, version: "1", owner: t@example.com, description: audited access}
spec:
  effect: read
  arguments: {type: object, properties: {text: {type: string}}}
  lookups: [{name: ticket, collection: tickets, key: '"T-1"'}]
  rules:
    - name: needs-a-person
      expression: 'args.text != "ask"'
      error_class: confirmation_required
      message: a person confirms this
    - name: not-empty
      expression: 'args.text != ""'
      error_class: invalid_argument
      message: say something
  examples: [{arguments: {text: hi}}]
---
apiVersion: callgate/v1
kind: ToolContract
metadata: {name: conditional, version: "1", owner: t@example.com, description: may look up}
spec:
  effect: read
  arguments: {type: object, properties: {text: {type: string}}}
  lookups:
    - {name: ticket, collection: tickets, key: '"T-1"', when: 'args.text != "skip"'}
  examples: [{arguments: {text: hi}}]
---
apiVersion: callgate/v1
kind: ToolContract
metadata: {name: listing, version: "1", owner: t@example.com, description: many records}
spec:
  effect: read
  arguments: {type: object, properties: {tenant: {type: string}}}
  lookups: [{name: tickets, collection: tickets, key: args.tenant, field: tenant, many: list}]
  examples: [{arguments: {tenant: acme}}]
---
apiVersion: callgate/v1
kind: ToolContract
metadata: {name: trial, version: "1", owner: t@example.com, description: an allow on trial}
spec:
  effect: read
  arguments: {type: object, properties: {text: {type: string}}}
  examples: [{arguments: {text: hi}}]
---
apiVersion: callgate/v1
kind: AccessPolicy
metadata: {name: shadowed-access, version: "1", owner: t@example.com, description: modes}
spec:
  rules:
    - {name: audited-deny, effect: deny, tools: [guarded], when: 'args.text == "audit"',
       mode: audit}
    - {name: warned-deny, effect: deny, tools: [guarded], when: 'args.text == "warn"',
       mode: warn}
    - {name: trial-allow, effect: allow, tools: [trial], when: "true", mode: audit}
    - {name: trial-allow-too, effect: allow, tools: [trial], when: "true"}
    - {name: everyone, effect: allow, tools: [guarded, conditional, listing], when: "true"}
"""


@pytest.mark.parametrize(("call", "ended"), [
    ({"name": "guarded", "arguments": {"text": "hi"}}, "allowed"),
    ({"name": "guarded", "arguments": {"text": "audit"}}, "allowed"),  # shadow deny
    ({"name": "guarded", "arguments": {"text": "warn"}}, "allowed"),
    ({"name": "guarded", "arguments": {"text": "ask"}}, "rejected: confirmation_required"),
    ({"name": "guarded", "arguments": {"text": ""}}, "prepared: invalid_argument"),
    ({"name": "conditional", "arguments": {"text": "skip"}}, "allowed"),  # conditional
    ({"name": "conditional", "arguments": {"text": "hi"}}, "allowed"),
    ({"name": "listing", "arguments": {"tenant": "acme"}}, "allowed"),  # a listing look-up
    ({"name": "trial", "arguments": {"text": "hi"}}, "allowed"),  # an allow on trial
])
def test_shadowed_access_and_special_lookups_decide_alike(
        both_ways: Outcomes, tmp_path: Path, ref: Any, compile_gate: Any, call: dict[str, Any],
        ended: str) -> None:
    ref.write(tmp_path / "config.yaml", SHADOWED_ACCESS)
    gate = compile_gate(tmp_path, world=TINY_WORLD)
    gate.check(call, actor={"id": "U-1", "tenant": "acme"}, now=NOW)
    assert both_ways.reached == {ended: 1}


SESSION_REQUIRED = TINY_ACCESS.replace("spec:\n", """spec:
  session:
    type: object
    required: [authenticated]
    properties: {authenticated: {type: boolean}}
""", 1)


@pytest.mark.parametrize(("session", "ended"), [
    (None, "rejected: forbidden"),  # the schema asks for a field: an empty one is checked
    ({"authenticated": True}, "allowed"),
    ({"authenticated": "yes"}, "rejected: forbidden"),
])
def test_a_session_schema_that_refuses_an_empty_session_decides_alike(
        both_ways: Outcomes, tmp_path: Path, ref: Any, compile_gate: Any,
        session: dict[str, Any] | None, ended: str) -> None:
    ref.write(tmp_path / "tools.yaml", TINY_TOOLS)
    ref.write(tmp_path / "access.yaml", SESSION_REQUIRED)
    gate = compile_gate(tmp_path, world=TINY_WORLD)
    decision = gate.check({"name": "echo", "arguments": {"text": "hi"}},
                          actor={"id": "U-1", "tenant": "acme"}, now=NOW, session=session)
    assert both_ways.reached == {ended: 1}
    assert decision.allowed == (session == {"authenticated": True})


tickets = st.sampled_from(["T-1001", "T-1002", "T-1003", "T-2001", "T-9999", "T-1", 7, None])
people = st.sampled_from(["U-7", "U-8", "U-9", "U-20", "U-99999", "bob", None])
dates = st.sampled_from(["2026-12-15T09:00:00Z", "2026-01-01T00:00:00Z", "2026-11-29T12:00:00Z",
                         "tomorrow", "2026-12-15t09:00:00z", None])
actors = st.fixed_dictionaries(
    {"id": st.just("U-7"), "tenant": st.sampled_from(["acme", "globex"]),
     "role": st.sampled_from(["agent", "supervisor", "viewer", "owner"])},
    optional={"suspended": st.booleans(), "teams": st.just(["billing"])})


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ticket=tickets, person=people, due=dates, actor=actors,
       extra=st.sampled_from([{}, {"note": "call back"}, {"note": "x" * 600}, {"urgent": True}]))
def test_made_up_follow_ups_decide_alike(both_ways: Outcomes, gate: Gate, ticket: Any,
                                         person: Any, due: Any, actor: dict[str, Any],
                                         extra: dict[str, Any]) -> None:
    arguments = {k: v for k, v in (("ticketId", ticket), ("assigneeId", person),
                                   ("dueAt", due)) if v is not None}
    gate.check({"name": "createFollowUp", "arguments": {**arguments, **extra}},
                         actor=actor, now=NOW)


class CountingResolver:
    """A resolver that counts how often it is asked."""

    def __init__(self, records: list[dict[str, Any]]) -> None:
        self.records, self.asked = records, 0

    def __call__(self, field: str, value: Any) -> list[dict[str, Any]]:
        self.asked += 1
        return [r for r in self.records if r.get(field) == value]


@pytest.mark.parametrize(("ticket", "person", "asked"), [
    ("T-9999", "U-7", {"tickets": 1, "users": 0}),  # no ticket: the users are never asked
    ("T-1001", "U-99999", {"tickets": 1, "users": 1}),  # no person
    ("T-1001", "U-7", {"tickets": 1, "users": 1}),
])
def test_every_resolver_is_asked_once(gate: Gate, reference_world: dict[str, Any], dana: Any,
                                      ticket: str, person: str, asked: dict[str, int]) -> None:
    """A database behind a resolver is asked once per look-up, whatever the outcome."""
    resolvers = {name: CountingResolver(records) for name, records in reference_world.items()}
    counted = Gate(gate.config, resolvers=resolvers)
    decision = counted.check(
        {"name": "createFollowUp", "arguments": {"ticketId": ticket, "assigneeId": person,
                                                 "dueAt": "2026-12-15T09:00:00Z"}},
        actor=dana, now=NOW)
    assert {name: resolvers[name].asked for name in asked} == asked
    assert decision.error_class in (None, "not_found")


def test_a_plan_shows_its_source_in_tracebacks(gate: Gate) -> None:
    """The generated code is registered in ``linecache``: tracebacks, debuggers and
    coverage show the plan's own lines."""
    tool_plan = Gate(gate.config).plan("createFollowUp")  # made here, not by another test
    assert "def decide(" in tool_plan.source
    filename = tool_plan.decide.__code__.co_filename
    assert filename.startswith("<callgate plan ") and filename.endswith("of createFollowUp>")
    assert linecache.getline(filename, 1).startswith("def decide(")

    unbound = Gate(gate.config)  # no resolvers: the host's mistake surfaces as an exception
    with pytest.raises(LookupError) as raised:
        unbound.check({"name": "createFollowUp", "arguments": {
            "ticketId": "T-1001", "assigneeId": "U-7", "dueAt": "2026-12-15T09:00:00Z"}},
            actor={"id": "U-7", "tenant": "acme", "role": "agent"}, now=NOW)
    shown = "".join(traceback.format_exception(raised.value))
    assert "raise _validate.no_resolver(_contract, _lookup0)" in shown
