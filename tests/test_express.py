"""The express lane gives exactly the general steps' decisions, only sooner.

Every check below decides each call twice, once with the lane and once through the general
steps alone (``Gate.express = False``), and compares the two decisions field by field:
route, class, rule, messages, trace, warnings, log. The calls: every shipped scenario and
policy test, a configuration full of shadow modes and evaluation errors, and calls made up
by hypothesis. Counting how far the lane took each call shows it was really used, for
passes, denials and violations alike."""

from __future__ import annotations

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
from callgate_rules.pipeline import express
from callgate_rules.pipeline.decision import Decision
from callgate_rules.pipeline.gate import Gate

from .conftest import REPO
from .test_steps import TINY_ACCESS, TINY_TOOLS, TINY_WORLD

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
LOG_FIELDS_THAT_VARY = ("ts", "elapsed_ms", "request_id")


def comparable(decision: Decision) -> dict[str, Any]:
    """Everything a decision says, but the clock readings and drawn IDs of its log."""
    fields = decision.as_dict()
    fields["log"] = {k: v for k, v in fields["log"].items() if k not in LOG_FIELDS_THAT_VARY}
    fields["confirmation_token"] = None  # signed over a fresh timestamp
    return fields


class Lanes:
    """Counts how far the lane took each call, by outcome."""

    def __init__(self) -> None:
        self.reached: Counter[str] = Counter()


@pytest.fixture
def both_ways(monkeypatch: pytest.MonkeyPatch) -> Iterator[Lanes]:
    """Make every ``Gate._check`` decide with and without the lane and compare."""
    lanes = Lanes()
    original_check = Gate._check
    original_of = express.ExpressLane.of

    def counted_lane(*args: Any) -> express.ExpressLane | None:
        lane = original_of(*args)
        if lane is None:
            return None
        run = lane.run

        def counted_run(*args: Any) -> Any:
            reached, outcome = run(*args)
            lanes.reached[f"rejected: {outcome.template.error_class}"
                          if isinstance(outcome, express.Foreseen) else reached.name] += 1
            return reached, outcome

        lane.run = counted_run
        return lane

    def checked_both_ways(self: Gate, *args: Any, **kwargs: Any) -> Any:
        self.express = False
        general, _ = original_check(self, *args, **kwargs)
        self.express = True
        decision, progress = original_check(self, *args, **kwargs)
        assert comparable(decision) == comparable(general)
        return decision, progress

    monkeypatch.setattr(express.ExpressLane, "of", counted_lane)
    monkeypatch.setattr(Gate, "_check", checked_both_ways)
    yield lanes


def test_every_scenario_and_policy_test_decides_alike(both_ways: Lanes) -> None:
    config = load_config_for(str(REPO / "contracts"), str(REPO / "policies"))
    cases = [*load_scenarios([REPO / "examples" / "scenarios"]),
             *load_tests([REPO / "policies" / "tests"])]
    results = run_scenarios(cases, config)
    assert [r.failures for r in results if r.failures] == []
    lane = both_ways.reached
    # The lane decided calls of every kind itself, and handed others over.
    assert lane["EVERYTHING"] >= 10
    assert lane["rejected: forbidden"] >= 1 and lane["rejected: invalid_argument"] >= 1
    assert lane["NOTHING"] >= 1 and lane["LOOKING_UP"] >= 1


@pytest.fixture
def tiny(tmp_path: Path, ref: Any, compile_gate: Any) -> Gate:
    ref.write(tmp_path / "tools.yaml", TINY_TOOLS)
    ref.write(tmp_path / "access.yaml", TINY_ACCESS)
    gate: Gate = compile_gate(tmp_path, world=TINY_WORLD)
    return gate


@pytest.mark.parametrize(("call", "lane"), [
    ({"name": "echo", "arguments": {"text": "hi"}}, "EVERYTHING"),
    ({"name": "echo", "arguments": {"text": "blocked"}}, "rejected: forbidden"),  # a deny
    ({"name": "echo", "arguments": {"text": 5}}, "NOTHING"),  # the schema says no
    ({"name": "orphan", "arguments": {"text": "hi"}}, "rejected: forbidden"),  # by default
    ({"name": "strict", "arguments": {"ticketId": "T-1"}}, "AUTHORIZED"),  # rule error
    ({"name": "strict", "arguments": {"ticketId": "T-9"}}, "LOOKING_UP"),  # no record
    ({"name": "lenient-document", "arguments": {"ticketId": "T-1"}}, "AUTHORIZED"),
    ({"name": "lenient-rule", "arguments": {"ticketId": "T-1"}}, "AUTHORIZED"),
    ({"name": "shadowed", "arguments": {"text": "hi"}}, "AUTHORIZED"),  # audit and warn
])
def test_shadow_modes_and_errors_decide_alike(both_ways: Lanes, tiny: Gate,
                                              call: dict[str, Any], lane: str) -> None:
    tiny.check(call, actor={"id": "U-1", "tenant": "acme"}, now=NOW)
    assert both_ways.reached == {lane: 1}


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


@pytest.mark.parametrize(("call", "lane"), [
    ({"name": "guarded", "arguments": {"text": "hi"}}, "EVERYTHING"),
    ({"name": "guarded", "arguments": {"text": "audit"}}, "REFERENCES"),  # shadow deny
    ({"name": "guarded", "arguments": {"text": "warn"}}, "REFERENCES"),
    ({"name": "guarded", "arguments": {"text": "ask"}}, "AUTHORIZED"),  # confirmation
    ({"name": "guarded", "arguments": {"text": ""}}, "rejected: invalid_argument"),
    ({"name": "conditional", "arguments": {"text": "skip"}}, None),  # a conditional look-up
    ({"name": "listing", "arguments": {"tenant": "acme"}}, None),  # a listing look-up
    ({"name": "trial", "arguments": {"text": "hi"}}, None),  # an allow on trial
])
def test_shadowed_access_and_special_lookups_decide_alike(
        both_ways: Lanes, tmp_path: Path, ref: Any, compile_gate: Any, call: dict[str, Any],
        lane: str | None) -> None:
    ref.write(tmp_path / "config.yaml", SHADOWED_ACCESS)
    gate = compile_gate(tmp_path, world=TINY_WORLD)
    gate.check(call, actor={"id": "U-1", "tenant": "acme"}, now=NOW)
    assert both_ways.reached == ({lane: 1} if lane else {})


SESSION_REQUIRED = TINY_ACCESS.replace("spec:\n", """spec:
  session:
    type: object
    required: [authenticated]
    properties: {authenticated: {type: boolean}}
""", 1)


@pytest.mark.parametrize(("session", "lane"), [
    (None, "NOTHING"),  # the schema asks for a field: an empty session is checked too
    ({"authenticated": True}, "EVERYTHING"),
    ({"authenticated": "yes"}, "NOTHING"),
])
def test_a_session_schema_that_refuses_an_empty_session_decides_alike(
        both_ways: Lanes, tmp_path: Path, ref: Any, compile_gate: Any,
        session: dict[str, Any] | None, lane: str) -> None:
    ref.write(tmp_path / "tools.yaml", TINY_TOOLS)
    ref.write(tmp_path / "access.yaml", SESSION_REQUIRED)
    gate = compile_gate(tmp_path, world=TINY_WORLD)
    decision = gate.check({"name": "echo", "arguments": {"text": "hi"}},
                          actor={"id": "U-1", "tenant": "acme"}, now=NOW, session=session)
    assert both_ways.reached == {lane: 1}
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
def test_made_up_follow_ups_decide_alike(both_ways: Lanes, gate: Gate, ticket: Any,
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
    """The general step resumes the look-ups where the lane stopped, with the records the
    lane already has: a database behind a resolver is asked once per look-up."""
    resolvers = {name: CountingResolver(records) for name, records in reference_world.items()}
    counted = Gate(gate.config, resolvers=resolvers)
    decision = counted.check(
        {"name": "createFollowUp", "arguments": {"ticketId": ticket, "assigneeId": person,
                                                 "dueAt": "2026-12-15T09:00:00Z"}},
        actor=dana, now=NOW)
    assert {name: resolvers[name].asked for name in asked} == asked
    assert decision.error_class in (None, "not_found")
