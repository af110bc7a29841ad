"""The gate's boundary under host faults and hostile callers (the pipeline's part).

What an executor, a resolver or the store says never reaches the model; a resolver that
raises, dawdles or returns junk gets a classified decision, the same one from the plan as
from the reference evaluator; a store that fails mid-call is routed with exactly-once
kept; a confirmation answers only for what it did; a rule that cannot be evaluated does
not claim the violation it could not check; masked arguments stay masked wherever an
argument can reappear in a log or a review item."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from callgate_rules import Refused, Route
from callgate_rules.documents.compiler import load
from callgate_rules.errors import StoreError
from callgate_rules.harness.world import WorldResolvers
from callgate_rules.pipeline.gate import Gate
from callgate_rules.store.memory import MemoryStore
from callgate_rules.taxonomy import ErrorClass
from tests.conftest import Calls

from .test_execution import EMAIL, draft, make_gate
from .test_plan import NOW, Outcomes, both_ways  # noqa: F401 - the fixture, shared
from .test_steps import TINY_ACCESS, TINY_TOOLS, TINY_WORLD

FOLLOW_UP = Calls.plain("createFollowUp", {"ticketId": "T-1001", "assigneeId": "U-7",
                                           "dueAt": "2026-12-15T09:00:00Z",
                                           "note": "call back about SECRET-NOTE-42"})
SECRET = "SECRET-TOKEN-123 internal password hunter2"


def text_of(decision: Any) -> str:
    """Everything the model and the person are shown."""
    return f"{decision.agent_message}\n{decision.user_message}\n{decision.draft or ''}"


# What the host says stays in the log --------------------------------------------------------


@pytest.mark.parametrize("raised", [Refused(SECRET), RuntimeError(SECRET), TimeoutError(SECRET)])
def test_an_executors_words_never_reach_the_model(reference_world: dict[str, Any],
                                                  dana: dict[str, Any],
                                                  raised: Exception) -> None:
    gate, _, _ = make_gate(reference_world)

    def executor(request: Any) -> Any:
        raise raised

    gate.executors = {"createFollowUp": executor}
    decision = gate.handle(FOLLOW_UP, actor=dana, request_id="r-secret")
    assert decision.route != Route.RETURN_RESULT
    assert "SECRET" not in text_of(decision) and "hunter2" not in text_of(decision)
    if isinstance(raised, Refused):  # the destination's answer: engineers still see it
        assert "SECRET-TOKEN-123" in decision.log["detail"]


def test_a_resolvers_words_never_reach_the_model(gate: Gate, dana: dict[str, Any]) -> None:
    def failing(field: str, value: Any) -> Any:
        raise ConnectionError(SECRET)

    broken = Gate(gate.config, resolvers={"tickets": failing, "users": failing})
    decision = broken.check(FOLLOW_UP, actor=dana, now=NOW)
    assert (decision.route, decision.error_class) == (Route.RETRY, ErrorClass.TRANSIENT)
    assert "SECRET" not in text_of(decision)
    assert "SECRET-TOKEN-123" in decision.log["detail"]


# Resolvers that return junk -----------------------------------------------------------------


def endless() -> Iterator[dict[str, Any]]:
    return ({"id": "T-1001", "n": n} for n in itertools.count())


JUNK: dict[str, Callable[[], Any]] = {
    "None": lambda: None, "a number": lambda: 5, "text": lambda: "T-1001",
    "bytes": lambda: b"T-1001", "a record, not a list": lambda: {"id": "T-1001"},
    "numbers": lambda: [1, 2], "a record and text": lambda: [{"id": "T-1001"}, "x"],
    "an object": object, "an endless generator": endless,
    "a generator of text": lambda: (c for c in "ab"),
}


@pytest.mark.parametrize("junk", sorted(JUNK))
def test_junk_from_a_resolver_is_a_transient_refusal(both_ways: Outcomes, gate: Gate,  # noqa: F811
                                                     dana: dict[str, Any], junk: str) -> None:
    world = WorldResolvers({"users": [{"id": "U-7", "tenant": "acme", "teams": ["billing"]}]})
    broken = Gate(gate.config, resolvers={"tickets": lambda field, value: JUNK[junk](),
                                          "users": world["users"]})
    decision = broken.check(FOLLOW_UP, actor=dana, now=NOW)
    assert (decision.route, decision.error_class) == (Route.RETRY, ErrorClass.TRANSIENT)
    assert both_ways.reached == {"rejected: transient": 1}


def test_a_generator_of_records_is_read_like_a_list(both_ways: Outcomes, gate: Gate,  # noqa: F811
                                                    reference_world: dict[str, Any],
                                                    dana: dict[str, Any]) -> None:
    world = WorldResolvers(reference_world)
    generating = Gate(gate.config, resolvers={
        name: (lambda field, value, name=name: iter(world[name](field, value)))
        for name in ("tickets", "users")})
    assert generating.check(FOLLOW_UP, actor=dana, now=NOW).route == Route.EXECUTE


junk_values = st.recursive(
    st.none() | st.integers() | st.text(max_size=5) | st.binary(max_size=3) | st.booleans(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                  max_size=2),
    max_leaves=6)


@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tickets=junk_values, users=junk_values)
def test_any_resolver_answer_decides_alike_and_classified(both_ways: Outcomes, gate: Gate,  # noqa: F811
                                                          dana: dict[str, Any],
                                                          tickets: Any, users: Any) -> None:
    """Whatever the resolvers return, the plan and the reference evaluator decide the same
    (``both_ways`` compares them), and nothing escapes as an exception."""
    odd = Gate(gate.config, resolvers={"tickets": lambda field, value: tickets,
                                       "users": lambda field, value: users})
    decision = odd.check(FOLLOW_UP, actor=dana, now=NOW)
    assert decision.route in set(Route)


SLOW_TOOLS = """\
apiVersion: callgate/v1
kind: ToolContract
metadata: {name: slow, version: "1", owner: t@example.com, description: a slow look-up}
spec:
  effect: read
  timeout: 200ms
  arguments: {type: object, properties: {ticketId: {type: string}}}
  lookups: [{name: ticket, collection: tickets, key: args.ticketId}]
  examples: [{arguments: {ticketId: T-1}}]
---
apiVersion: callgate/v1
kind: AccessPolicy
metadata: {name: slow-access, version: "1", owner: t@example.com, description: anyone}
spec:
  rules: [{name: anyone, effect: allow, tools: [slow], when: "true"}]
"""


def test_a_look_up_later_than_the_timeout_does_not_decide(tmp_path: Path, ref: Any,
                                                          compile_gate: Any) -> None:
    ref.write(tmp_path / "slow.yaml", SLOW_TOOLS)
    compiled = compile_gate(tmp_path, world=TINY_WORLD)

    def dawdling(field: str, value: Any) -> list[dict[str, Any]]:
        time.sleep(0.3)
        return [{"id": "T-1", "tenant": "acme"}]

    slow = Gate(compiled.config, resolvers={"tickets": dawdling})
    decision = slow.check({"name": "slow", "arguments": {"ticketId": "T-1"}},
                          actor={"id": "U-1"}, now=NOW)
    assert (decision.route, decision.error_class) == (Route.RETRY, ErrorClass.TRANSIENT)
    assert "took too long" in decision.agent_message
    fast = Gate(compiled.config, resolvers=WorldResolvers(TINY_WORLD))
    assert fast.check({"name": "slow", "arguments": {"ticketId": "T-1"}},
                      actor={"id": "U-1"}, now=NOW).route == Route.EXECUTE


# The store fails mid-call -------------------------------------------------------------------


class FailingStore(MemoryStore):
    """A memory store whose ``fail`` method raises, as a disk that fills or a database that
    goes away would."""

    def __init__(self, fail: str) -> None:
        super().__init__()
        self.fail = fail

    def claim(self, *args: Any, **kwargs: Any) -> Any:
        if self.fail == "claim":
            raise StoreError("disk full")
        return super().claim(*args, **kwargs)

    def finish(self, *args: Any, **kwargs: Any) -> Any:
        if self.fail == "finish":
            raise StoreError("database connection lost")
        return super().finish(*args, **kwargs)


def test_a_store_failing_before_sending_is_transient_and_writes_nothing(
        reference_world: dict[str, Any], dana: dict[str, Any]) -> None:
    gate, simulator, _ = make_gate(reference_world, store=FailingStore("claim"))
    decision = gate.handle(FOLLOW_UP, actor=dana, request_id="r-store")
    assert (decision.route, decision.error_class) == (Route.RETRY, ErrorClass.TRANSIENT)
    assert simulator.write_count() == 0
    assert "disk full" in decision.log["detail"] and "disk full" not in text_of(decision)


def test_a_store_failing_after_sending_goes_to_a_person_and_never_writes_twice(
        reference_world: dict[str, Any], dana: dict[str, Any]) -> None:
    store = FailingStore("finish")
    gate, simulator, clock = make_gate(reference_world, store=store)
    decision = gate.handle(FOLLOW_UP, actor=dana, request_id="r-store")
    assert (decision.route, decision.error_class) == (Route.REVIEW, ErrorClass.RECONCILE_FAILED)
    assert simulator.write_count() == 1
    # The claim left behind: once its lease expires, the same call reconciles, not rewrites.
    store.fail = ""
    clock.now = clock.now.replace(hour=clock.now.hour + 1)
    again = gate.handle(FOLLOW_UP, actor=dana, request_id="r-store")
    assert again.route == Route.RETURN_RESULT and simulator.write_count() == 1


# Confirmation answers only for what it did --------------------------------------------------


def test_another_tenants_token_never_executes(reference_world: dict[str, Any],
                                             dana: dict[str, Any]) -> None:
    gate, simulator, _ = make_gate(reference_world)
    held = draft(gate, dana)
    outsider = {"id": "U-20", "tenant": "globex", "role": "agent"}
    decision = gate.confirm(held.confirmation_token, actor=outsider, confirmed_by="U-20")
    assert decision.route == Route.REFUSE and decision.route != Route.EXECUTE
    assert "nothing was executed" in decision.agent_message
    assert "All checks passed" not in decision.agent_message
    assert simulator.write_count() == 0


DENY_EMAIL = """\
apiVersion: callgate/v1
kind: AccessPolicy
metadata: {name: no-more-email, version: "1", owner: t@example.com, description: revoked}
spec:
  rules: [{name: e-mail-revoked, effect: deny, tools: [sendEmail], when: "true"}]
"""


def test_a_call_whose_rights_changed_is_refused_saying_nothing_ran(
        tmp_path: Path, ref: Any, reference_world: dict[str, Any],
        dana: dict[str, Any]) -> None:
    gate, simulator, _ = make_gate(reference_world)
    held = draft(gate, dana)
    contracts, policies = ref.copy(tmp_path)
    ref.write(policies / "revoked.yaml", DENY_EMAIL)
    gate.config = load([contracts, policies])  # the rights change while the draft waits
    decision = gate.confirm(held.confirmation_token, actor=dana, confirmed_by="dana")
    assert (decision.route, decision.error_class) == (Route.REFUSE, ErrorClass.FORBIDDEN)
    assert "nothing was executed" in decision.agent_message
    assert "no longer passes its checks" in decision.user_message
    assert simulator.write_count() == 0


@pytest.mark.parametrize("token", [None, 5, "", "\ud800.\ud800", "a" * 100_000, {"op": 1}])
def test_a_token_that_is_not_one_is_a_refusal(reference_world: dict[str, Any],
                                              dana: dict[str, Any], token: Any) -> None:
    gate, simulator, _ = make_gate(reference_world)
    draft(gate, dana)
    decision = gate.confirm(token, actor=dana, confirmed_by="dana")
    assert (decision.route, decision.error_class) == (Route.REFUSE, ErrorClass.FORBIDDEN)
    assert simulator.write_count() == 0


# A rule that cannot be evaluated ------------------------------------------------------------


def test_a_rule_that_cannot_be_evaluated_does_not_claim_the_violation(
        tmp_path: Path, ref: Any, compile_gate: Any) -> None:
    ref.write(tmp_path / "tools.yaml", TINY_TOOLS)
    ref.write(tmp_path / "access.yaml", TINY_ACCESS)
    tiny = compile_gate(tmp_path, world=TINY_WORLD)  # the ticket has no ``priority``
    decision = tiny.check({"name": "strict", "arguments": {"ticketId": "T-1"}},
                          actor={"id": "U-1", "tenant": "acme"}, now=NOW)
    assert decision.error_class == ErrorClass.CONFLICT  # still fails closed
    assert "could not be checked" in decision.agent_message
    assert "Only high-priority tickets" not in decision.agent_message
    assert "could not be checked" in decision.user_message


# Masked values stay masked ------------------------------------------------------------------


def test_a_masked_argument_is_masked_wherever_it_reappears(reference_world: dict[str, Any],
                                                           dana: dict[str, Any]) -> None:
    gate, simulator, _ = make_gate(reference_world)
    create = simulator.executors()["createFollowUp"]

    def echoing(request: Any) -> dict[str, Any]:  # a destination that echoes what it got
        return {**create(request), "echo": dict(request.arguments),
                "summary": f"created with note {request.arguments['note']}"}

    gate.executors = {"createFollowUp": echoing}
    decision = gate.handle(FOLLOW_UP, actor=dana, request_id="r-mask")
    assert decision.route == Route.RETURN_RESULT
    assert "SECRET-NOTE-42" not in json.dumps(decision.log, default=str)
    assert decision.log["arguments"]["note"] == "***"

    long_note = Calls.plain("createFollowUp", {"ticketId": "T-1001", "assigneeId": "U-7",
                                               "dueAt": "2026-12-15T09:00:00Z",
                                               "note": "SECRET-NOTE-42 " + "x" * 600})
    rejected = gate.check(long_note, actor=dana, now=NOW)
    assert rejected.error_class == ErrorClass.INVALID_ARGUMENT
    assert "SECRET-NOTE-42" not in json.dumps(rejected.log, default=str)


def test_review_items_show_masked_arguments(reference_world: dict[str, Any],
                                            dana: dict[str, Any]) -> None:
    store = FailingStore("")
    gate, _, _ = make_gate(reference_world, faults={"createFollowUp": {
        "corrupt_result": True}}, store=store)  # verify fails: a person reviews
    gate.handle(FOLLOW_UP, actor=dana, request_id="r-review")
    shown = json.dumps([item.__dict__ for item in store.list_reviews()], default=str)
    assert "SECRET-NOTE-42" not in shown


def test_an_email_draft_keeps_what_the_person_must_see(reference_world: dict[str, Any],
                                                       dana: dict[str, Any]) -> None:
    """The person who confirms sees what will be sent; the log does not keep the body."""
    gate, _, _ = make_gate(reference_world)
    held = gate.handle(EMAIL, actor=dana, request_id="r-draft")
    assert "anna.petrova@northwind.example" in held.draft
    assert held.log["arguments"]["body"] == "***"



# A record the actor may not see is no record ------------------------------------------------


def test_another_tenants_payee_reads_exactly_like_an_unknown_account(
        both_ways: Outcomes, gate: Gate, dana: dict[str, Any]) -> None:  # noqa: F811
    """Globex's payee IBAN, never mentioned in the conversation, used to get a request for
    confirmation where an unknown IBAN got a refusal: the model could probe which accounts
    other tenants have on file."""
    def pay(iban: str) -> dict[str, Any]:
        return {"name": "sendPayment", "arguments": {"recipientIban": iban, "amount": 10,
                                                     "currency": "EUR"}}

    session = {"authenticated": True}
    theirs = gate.check(pay("GB29NWBK60161331926819"), actor=dana, now=NOW, session=session)
    unknown = gate.check(pay("GB94BARC10201530093459"), actor=dana, now=NOW, session=session)
    assert (theirs.route, theirs.error_class, theirs.rule) == \
        (unknown.route, unknown.error_class, unknown.rule)
    assert theirs.agent_message.replace("GB29NWBK60161331926819", "IBAN") == \
        unknown.agent_message.replace("GB94BARC10201530093459", "IBAN")
    assert theirs.user_message == unknown.user_message


def test_another_tenants_record_is_not_a_candidate(both_ways: Outcomes, gate: Gate,  # noqa: F811
                                                   reference_world: dict[str, Any],
                                                   dana: dict[str, Any]) -> None:
    """A resolver that returns one ticket of the actor's tenant and one of another: not
    "matches 2 tickets", but the actor's one."""
    world = WorldResolvers(reference_world)
    own, other = world["tickets"]("id", "T-1001")[0], world["tickets"]("id", "T-2001")[0]
    mixed = Gate(gate.config, resolvers={"tickets": lambda field, value: [own, other],
                                         "users": world["users"]})
    decision = mixed.check(FOLLOW_UP, actor=dana, now=NOW)
    assert decision.route == Route.EXECUTE and "2001" not in decision.agent_message
    alone = Gate(gate.config, resolvers={"tickets": lambda field, value: [other],
                                         "users": world["users"]})
    hidden = alone.check(FOLLOW_UP, actor=dana, now=NOW)
    missing = Gate(gate.config, resolvers={"tickets": lambda field, value: [],
                                           "users": world["users"]}).check(
        FOLLOW_UP, actor=dana, now=NOW)
    assert hidden.agent_message == missing.agent_message
    assert hidden.user_message == missing.user_message


def test_a_lone_surrogate_in_a_tool_name_is_shown_escaped_on_the_cli(tmp_path: Path) -> None:
    import subprocess
    import sys

    from tests.conftest import DANA_FILE, REPO

    call = tmp_path / "call.json"
    call.write_text('{"name": "\\ud800x", "arguments": {}}', encoding="utf-8")
    for output in ("text", "json"):
        done = subprocess.run(
            [sys.executable, "-m", "callgate_rules.cli", "check", "--call", str(call),
             "--actor", str(DANA_FILE), "--format", output],
            capture_output=True, cwd=REPO, timeout=120)
        assert b"Traceback" not in done.stderr, done.stderr.decode(errors="replace")
        assert done.returncode in (0, 1)
        assert b"unknown_tool" in done.stdout


# Hostile structure passed as an object -----------------------------------------------------


def nested_lists(depth: int) -> list[Any]:
    outer: list[Any] = []
    inner = outer
    for _ in range(depth):
        inner.append([])
        inner = inner[0]
    return outer


def nested_messages(depth: int) -> dict[str, Any]:
    outer: dict[str, Any] = {"role": "assistant", "content": []}
    inner = outer
    for _ in range(depth):
        child: dict[str, Any] = {"role": "assistant", "content": []}
        inner["content"].append(child)
        inner = child
    return outer


@pytest.mark.parametrize("output", [
    nested_lists(100_000), nested_messages(100_000),
    {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {
        "name": "getTicketStatus", "arguments": "{}"}}] * 100_000},
], ids=["lists deeper than the recursion limit", "messages deeper than the recursion limit",
        "100,000 calls as an object"])
def test_a_hostile_object_is_a_quick_decision(gate: Gate, dana: dict[str, Any],
                                              output: Any) -> None:
    started = time.perf_counter()
    decision = gate.check(output, actor=dana, now=NOW)
    assert (decision.route, decision.error_class) == (Route.REGENERATE, ErrorClass.MALFORMED)
    assert time.perf_counter() - started < 2.0  # bounded by the limits, not by the object
