"""A decision builds its messages, trace and log when first read; reading them later must
give what reading them at once gives, and a decision stays an ordinary value."""

from __future__ import annotations

import copy
import json
import pickle
import threading
from datetime import UTC, datetime
from typing import Any

import pytest

from callgate_rules import Run
from callgate_rules.documents.compiler import load
from callgate_rules.harness.scenarios import FakeClock
from callgate_rules.harness.simulator import Simulator, faults_by_tool
from callgate_rules.harness.world import WorldResolvers
from callgate_rules.pipeline.decision import MESSAGE_FIELDS
from callgate_rules.pipeline.gate import Gate
from callgate_rules.store import MemoryStore
from tests.conftest import Calls, Reference


def read_all(decision: Any) -> dict[str, Any]:
    fields: dict[str, Any] = decision.as_dict()
    fields["log"] = {k: v for k, v in fields["log"].items() if k not in ("ts", "elapsed_ms")}
    return fields


def test_messages_tell_what_the_call_was_decided_on(gate: Gate, reference_world: Any,
                                                    dana: dict[str, Any], now: Any) -> None:
    """Messages read after the host changed its actor, a record and the decision's
    arguments still speak of the call as it was decided (one level deep, like the log)."""
    for changes in ({"ticketId": "T-1002"},  # a closed ticket: the rule's own message
                    {"ticketId": "T-2001"},  # another tenant's: the denial's message
                    {"dueAt": "2026-01-01T00:00:00Z"}):
        world = copy.deepcopy(reference_world)
        actor = dict(dana)
        own = Gate(gate.config, resolvers=WorldResolvers(world))
        call = Calls.follow_up(**changes)
        expected = read_all(own.check(call, actor=actor, now=now, request_id="r"))
        later = own.check(call, actor=actor, now=now, request_id="r")
        actor["tenant"] = "globex"
        for ticket in world["tickets"]:
            ticket["status"] = "reopened"
        assert later.arguments is not None
        later.arguments["ticketId"] = "T-0000"  # type: ignore[index]
        got = read_all(later)
        got["arguments"] = expected["arguments"]  # the one field handed out as it is
        assert got == expected


def test_a_decision_is_an_ordinary_value(gate: Gate, dana: dict[str, Any], now: Any) -> None:
    for changes in ({}, {"ticketId": "T-2001"}, {"dueAt": "2026-01-01T00:00:00Z"}):
        decision = gate.check(Calls.follow_up(**changes), actor=dana, now=now)
        json.dumps(decision.as_dict())
        assert type(decision.versions) is dict and json.loads(json.dumps(decision.versions))
        assert copy.deepcopy(decision) == decision
        assert pickle.loads(pickle.dumps(decision)) == decision
        assert decision.replace()  == decision and decision.fields()["route"] == decision.route
        decision.versions.clear()  # a decision's own: the next one is unaffected
        assert gate.check(Calls.follow_up(), actor=dana, now=now).versions


class Text(str):
    """A host's own string type."""


def test_string_subclasses_are_read_as_strings(gate: Gate, dana: dict[str, Any],
                                               now: Any) -> None:
    arguments = Text(json.dumps(Calls.follow_up_args()))
    message = Text(json.dumps({"name": "createFollowUp", "arguments": arguments}))
    for output in (message, {"name": "createFollowUp", "arguments": arguments}):
        decision = gate.check(output, actor=dana, now=now)
        assert decision.error_class is None, decision.agent_message


ROUTING_WITH_PLACEHOLDERS = """\
apiVersion: callgate/v1
kind: RoutingTable
metadata: {name: placeholders, version: "1", owner: t@example.com, description: messages}
spec:
  routes: {forbidden: refuse}
  messages:
    forbidden:
      agent: "No {tool} on ticket {args.ticketId} for a {actor.role} of {actor.tenant}."
"""


def test_routing_messages_fill_arguments_and_actor_as_decided(
        tmp_path: Any, ref: Any, compile_gate: Any, reference_world: Any,
        dana: dict[str, Any], now: Any) -> None:
    contracts, policies = ref.copy(tmp_path, ROUTING_WITH_PLACEHOLDERS)
    gate = compile_gate(contracts, policies, world=reference_world)
    actor = {**dana, "role": "owner"}  # not a role the actor schema knows: forbidden
    decision = gate.check(Calls.follow_up(), actor=actor, now=now)
    actor["tenant"] = "globex"
    decision.arguments["ticketId"] = "T-0000"  # type: ignore[index]
    assert decision.agent_message.startswith(
        "No createFollowUp on ticket T-1001 for a owner of acme.")


def test_the_log_keeps_the_versions_decided_with(gate: Gate, dana: dict[str, Any],
                                                 now: Any) -> None:
    for call in (Calls.follow_up(), Calls.follow_up(ticketId="T-2001"),
                 {"name": "noSuchTool", "arguments": {}}):
        decision = gate.check(call, actor=dana, now=now)
        expected = dict(decision.versions)
        decision.versions.clear()
        decision.versions["host"] = "annotated"
        assert decision.log["versions"] == expected


def test_an_unread_decision_can_be_copied(gate: Gate, dana: dict[str, Any], now: Any) -> None:
    for call in (Calls.follow_up(), Calls.follow_up(ticketId="T-2001"),
                 Calls.follow_up(dueAt="2026-01-01T00:00:00Z"), Calls.follow_up(urgent=1)):
        decision = gate.check(call, actor=dana, now=now, request_id="r")
        copied = copy.deepcopy(decision)  # before anything is read
        assert read_all(copied) == read_all(decision)



class _ReadsWhileCopied:
    """A host value in the actor whose deep copy reads, from another thread, a message of
    the decision being copied: as a request thread may while a logger copies it."""

    decision: Any = None

    def __deepcopy__(self, memo: dict[int, Any]) -> _ReadsWhileCopied:
        reader = threading.Thread(target=lambda: self.decision.agent_message)
        reader.start()
        reader.join()
        return _ReadsWhileCopied()


def test_a_decision_can_be_copied_while_its_messages_are_first_read(
        gate: Gate, dana: dict[str, Any], now: Any) -> None:
    for call in (Calls.follow_up(ticketId="T-2001"), Calls.follow_up(dueAt="2026-01-01T00:00:00Z")):
        hook = _ReadsWhileCopied()
        decision = gate.check(call, actor={**dana, "hook": hook}, now=now, request_id="r")
        hook.decision = decision
        copied = copy.deepcopy(decision)  # a first read happens half-way through
        assert copied.agent_message == decision.agent_message
        assert copied.error_class == decision.error_class

ROUTING_AFTER_EXECUTION = """\
apiVersion: callgate/v1
kind: RoutingTable
metadata: {name: after, version: "1", owner: t@example.com, description: messages}
spec:
  routes: {permanent: refuse}
  messages:
    permanent: {agent: "Refused for {actor.id} on {args.ticketId}.", user: "Sorry {actor.id}."}
  budgets: {calls_per_tool_per_run: 1}
  on_limit:
    path: refuse
    agent: "Enough for {actor.id} on {tool} ({args.ticketId}): {detail}."
"""


def test_routing_messages_fill_actor_after_execution_and_on_the_limit_path(
        tmp_path: Any, ref: Any, reference_world: Any, dana: dict[str, Any]) -> None:
    contracts, policies = ref.copy(tmp_path, ROUTING_AFTER_EXECUTION)
    world = copy.deepcopy(reference_world)
    simulator = Simulator(world, faults_by_tool({"createFollowUp": {"refuse": True}}))
    now = datetime(2026, 11, 29, 12, tzinfo=UTC)
    clock = FakeClock(now)
    gate = Gate(load([contracts, policies]), resolvers=WorldResolvers(world),
                executors=simulator.executors(), finder=simulator.find, store=MemoryStore(),
                clock=clock, sleep=clock.sleep, secret=b"s")
    run = Run(started_at=now)
    refused = gate.handle(Calls.follow_up(), actor=dana, request_id="r1", run=run)
    assert (refused.agent_message, refused.user_message) == (
        "Refused for U-7 on T-1001. Do not retry this call.", "Sorry U-7.")
    limited = gate.handle(Calls.follow_up(), actor=dana, request_id="r2", run=run)
    assert limited.agent_message.startswith("Enough for U-7 on createFollowUp (T-1001): ")


def test_both_messages_come_out_alike_whichever_is_read_first(
        tmp_path: Any, ref: Any, compile_gate: Any, reference_world: Any,
        dana: dict[str, Any], now: Any) -> None:
    """A rejection's two messages are made together on the first read of either; with
    several calls taken by "first", the agent message carries the note and the user
    message does not."""
    from .test_steps import SMALL_LIMITS_ROUTING

    contracts, policies = ref.copy(tmp_path, SMALL_LIMITS_ROUTING)
    first = compile_gate(contracts, policies, world=reference_world)
    past = Calls.follow_up_args(dueAt="2026-01-01T00:00:00Z")
    two_calls = {"role": "assistant", "tool_calls": [
        Calls.openai_tool_call("createFollowUp", past, "c1"),
        Calls.openai_tool_call("sendEmail", {"to": "x@example.com"}, "c2")]}
    for gate_ in (first, compile_gate(world=reference_world)):
        for call in (Calls.follow_up(ticketId="T-2001"), Calls.follow_up(urgent=1),
                     Calls.plain("createFollowUp", past), two_calls):
            if call is two_calls and gate_ is not first:
                continue
            seen = []
            for order in (MESSAGE_FIELDS, MESSAGE_FIELDS[::-1]):
                decision = gate_.check(call, actor=dana, now=now, request_id="r")
                seen.append({name: getattr(decision, name) for name in order})
            assert seen[0] == seen[1]
            assert all(isinstance(text, str) and text for text in seen[0].values())
            noted = "Note: took the first of 2 calls" in seen[0]["agent_message"]
            assert noted == (call is two_calls)
            assert "Note:" not in seen[0]["user_message"]


def test_the_pair_of_messages_is_made_once(
        tmp_path: Any, ref: Any, compile_gate: Any, reference_world: Any,
        dana: dict[str, Any], now: Any, monkeypatch: Any) -> None:
    """Reading the agent message then the user message renders them once, with a note
    (several calls, the first taken) as without."""
    from callgate_rules.pipeline import rejection_messages

    from .test_steps import SMALL_LIMITS_ROUTING

    contracts, policies = ref.copy(tmp_path, SMALL_LIMITS_ROUTING)
    first = compile_gate(contracts, policies, world=reference_world)
    renders: list[str] = []
    both = rejection_messages.messages_of

    def counted(decided: Any) -> Any:
        renders.append("both")
        return both(decided)

    monkeypatch.setattr(rejection_messages, "messages_of", counted)
    past = Calls.follow_up_args(dueAt="2026-01-01T00:00:00Z")
    for call in (Calls.plain("createFollowUp", past), Calls.follow_up(urgent=1),
                 {"role": "assistant", "tool_calls": [
                     Calls.openai_tool_call("createFollowUp", past, "c1"),
                     Calls.openai_tool_call("sendEmail", {"to": "x@example.com"}, "c2")]}):
        renders.clear()
        decision = first.check(call, actor=dana, now=now)
        _ = decision.agent_message, decision.user_message, decision.agent_message
        assert renders == ["both"], call


# a template that names a value no message can spell out
BROKEN_TEMPLATE_ROUTING = ROUTING_WITH_PLACEHOLDERS.replace(
    "on ticket {args.ticketId} for a {actor.role} of {actor.tenant}", "for {actor.loop}")


def test_a_message_that_cannot_be_rendered_leaves_the_other_readable(
        tmp_path: Any, ref: Any, compile_gate: Any, reference_world: Any,
        dana: dict[str, Any], now: Any) -> None:
    assert "{actor.loop}" in BROKEN_TEMPLATE_ROUTING
    gate_ = compile_gate(*ref.copy(tmp_path, BROKEN_TEMPLATE_ROUTING), world=reference_world)
    loop: dict[str, Any] = {}
    loop["me"] = loop
    decision = gate_.check(Calls.follow_up(), actor={**dana, "role": "owner", "loop": loop},
                           now=now)
    assert decision.error_class == "forbidden"
    for _ in range(2):  # it fails on every read, as a message of its own would
        with pytest.raises(ValueError, match="Circular"):
            _ = decision.agent_message
    assert decision.user_message == "You don't have permission to do that."


def test_an_unread_decision_can_be_pickled(gate: Gate, dana: dict[str, Any], now: Any) -> None:
    """Pickled and copied decisions take every field read, so a copy and its original tell
    the same: the log's request ID, drawn on first read, is drawn once."""
    for call in (Calls.follow_up(), Calls.follow_up(ticketId="T-2001"),
                 Calls.follow_up(dueAt="2026-01-01T00:00:00Z"), Calls.follow_up(urgent=1)):
        decision = gate.check(call, actor=dana, now=now)
        restored = pickle.loads(pickle.dumps(decision))
        copied = copy.deepcopy(gate.check(call, actor=dana, now=now))
        assert read_all(restored) == read_all(decision)
        assert restored.log["request_id"] == decision.log["request_id"]
        assert copied.agent_message == decision.agent_message


def test_nothing_is_worked_out_until_read(gate: Gate, dana: dict[str, Any], now: Any,
                                         monkeypatch: Any) -> None:
    """A check builds neither messages (of a rejection) nor the log nor trace entries
    until someone reads them, and reading works each out once."""
    from callgate_rules.pipeline import record, rejection_messages

    made: list[str] = []

    def counted(module: Any, name: str) -> None:
        original = getattr(module, name)

        def counting(*args: Any) -> Any:
            made.append(name)
            return original(*args)
        monkeypatch.setattr(module, name, counting)

    counted(rejection_messages, "messages_of")
    counted(record, "log_of")
    decision = gate.check(Calls.follow_up(ticketId="T-2001"), actor=dana, now=now)
    assert made == [] and all(type(entry) is tuple for entry in decision._trace)
    for _ in range(2):
        _ = decision.agent_message, decision.user_message, decision.log, decision.trace
    assert made == ["messages_of", "log_of"]


def test_threads_reading_one_decision_read_the_same_log(gate: Gate, dana: dict[str, Any],
                                                        now: Any) -> None:
    """No lock: every value is worked out from the record alone, the request ID included
    (named from the record when the host gave none)."""
    def logs_read_at_once(decision: Any) -> list[Any]:
        logs: list[Any] = []
        readers = [threading.Thread(target=lambda: logs.append(dict(decision.log)))
                   for _ in range(8)]
        for reader in readers:
            reader.start()
        for reader in readers:
            reader.join()
        return logs

    for call in (Calls.follow_up(), Calls.follow_up(ticketId="T-2001")):
        decision = gate.check(call, actor=dana, now=now)
        logs = logs_read_at_once(decision)
        assert len({json.dumps(log, sort_keys=True, default=str) for log in logs}) == 1
        other = gate.check(call, actor=dana, now=now)
        assert other.log["request_id"] != decision.log["request_id"]


def test_replace_keeps_a_message_it_is_given(gate: Gate, dana: dict[str, Any], now: Any) -> None:
    """A message given to ``replace`` stays, while the other is still worked out from the
    record; copies and pickles keep both."""
    decision = gate.check(Calls.follow_up(ticketId="T-2001"), actor=dana, now=now)
    worded = gate.check(Calls.follow_up(ticketId="T-2001"), actor=dana, now=now)
    custom = decision.replace(agent_message="CUSTOM")
    assert custom.user_message == worded.user_message
    assert custom.agent_message == "CUSTOM"
    for copied in (copy.copy(decision.replace(user_message="U")),
                   pickle.loads(pickle.dumps(decision.replace(user_message="U")))):
        assert (copied.agent_message, copied.user_message) == (worded.agent_message, "U")


def test_a_decision_without_a_record_is_given_its_words() -> None:
    from callgate_rules import Decision, Route

    with pytest.raises(TypeError, match="agent_message, user_message and log"):
        Decision(Route.REFUSE, None)
    given = Decision(Route.REFUSE, None, agent_message="a", user_message="u", log={})
    assert (given.agent_message, given.user_message, dict(given.log)) == ("a", "u", {})


def test_replace_copies_as_the_constructor_would(gate: Gate, dana: dict[str, Any],
                                                 now: Any) -> None:
    """``replace`` sets its changes over a copy of the decision's attributes: the original
    is untouched, None means what the constructor makes of it, an unknown field is refused,
    and the copy equals one the constructor makes of the same fields."""
    from callgate_rules import Decision, Route

    decision = gate.check(Calls.follow_up(), actor=dana, now=now)
    before = decision.fields()
    changed = decision.replace(route=Route.REVIEW, extra={"review_id": "r-1"}, versions=None,
                               trace=())
    assert decision.fields() == before
    assert (changed.route, dict(changed.extra), changed.versions, changed.trace) == (
        Route.REVIEW, {"review_id": "r-1"}, {}, ())
    assert dict(changed.replace(extra=None).extra) == {}
    assert changed.replace(extra=None).extra is Decision.extra  # the shared, read-only one
    rebuilt = Decision(**{**changed.fields(), "extra": changed.extra})
    assert rebuilt == changed
    with pytest.raises(TypeError, match="no field colour"):
        decision.replace(colour="red")


def test_counting_a_decision_reads_what_its_log_would_say(reference_world: Any,
                                                          dana: dict[str, Any]) -> None:
    """``Decision.counted()`` gives the counters what the whole log would, for every kind of
    decision, without building the log (an executed call's facts, or the record's)."""
    from collections import Counter

    from callgate_rules import decision_log

    clock = FakeClock(datetime(2026, 11, 29, 12, tzinfo=UTC))
    config = load([Reference.contracts, Reference.policies])
    simulator = Simulator(reference_world, faults_by_tool(
        {"createFollowUp": {"timeout_after_applying": 1}}))
    gate = Gate(config, executors=simulator.executors(), finder=simulator.find,
                resolvers=WorldResolvers(reference_world), store=MemoryStore(), clock=clock,
                sleep=clock.sleep)
    calls = [Calls.follow_up(), Calls.follow_up(ticketId="T-2001"),
             Calls.follow_up(dueAt="2026-01-01T00:00:00Z"), Calls.plain("nope", {}),
             Calls.plain("createFollowUp", "{not json"), Calls.follow_up(ticketId="T-404"),
             Calls.follow_up(assigneeId="U-7", ticketId="T-1002")]
    run = Run(started_at=clock())
    for number, call in enumerate(calls):
        decision = gate.handle(call, actor=dana, request_id=f"r{number}", run=run)
        from_record, from_log = Counter[str](), Counter[str]()
        decision_log.count(from_record, decision.counted())
        decision_log.count(from_log, decision.log)
        assert from_record == from_log, (call, decision.route, decision.error_class)


def test_the_record_holds_every_field_of_decided(gate: Gate, dana: dict[str, Any],
                                                  now: Any) -> None:
    """``Router.decided`` makes ``Decided`` from its fields in order, without
    ``_make``'s check: the record of an allowed and of a refused call has each of them."""
    from callgate_rules.pipeline.decision import Decided

    for call in (Calls.follow_up(), Calls.follow_up(ticketId="T-2001")):
        decided = gate.check(call, actor=dana, now=now).decided
        assert decided is not None and len(decided) == len(Decided._fields)
        assert decided == Decided(*decided)
