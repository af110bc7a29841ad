"""Steps 1–4 through the library (``Gate.check``): every outcome of SPEC §4 they can produce.

The reference configuration (contracts/, policies/, examples/world.yaml) is compiled once per
session (conftest); variants with other limits or rules are compiled once per module from
documents written to a temporary directory.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from callgate_rules.pipeline.decision import Decision
from callgate_rules.taxonomy import ErrorClass, Route

FOLLOW_UP = "createFollowUp"
NOT_FOUND_USER = "I couldn't find that record among the ones you can access."
ALL_CONTRACTS = {
    "ToolContract/createEvent", "ToolContract/createFollowUp", "ToolContract/getInvoice",
    "ToolContract/getTicketStatus", "ToolContract/searchContacts", "ToolContract/sendEmail",
}
PROPERTY_SETTINGS = settings(
    deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow],
)


@pytest.fixture
def check(gate: Any, dana: dict[str, Any], now: Any) -> Any:
    """``check(output, actor=dana)`` on the reference gate at the fixed ``now``."""

    def run(output: Any, actor: dict[str, Any] | None = None) -> Decision:
        decision: Decision = gate.check(output, actor=dana if actor is None else actor, now=now)
        return decision

    return run


def assert_refused(decision: Decision, error_class: str, route: str, rule: str | None) -> None:
    assert (decision.error_class, decision.route, decision.rule) == (error_class, route, rule), (
        decision.agent_message, decision.log.get("detail"))


# Documents for the variants ------------------------------------------------------------------

SMALL_LIMITS_ROUTING = """\
apiVersion: callgate/v1
kind: RoutingTable
metadata:
  name: small-limits
  version: "9.1.0"
  owner: tests@example.com
  description: the reference routes with small input limits and "take the first call"
spec:
  routes:
    malformed: regenerate
  input:
    max_bytes: 1024
    max_depth: 4
    max_string_length: 100
    max_calls: 3
    multiple_calls: first
"""

TINY_TOOLS = """\
apiVersion: callgate/v1
kind: ToolContract
metadata: {name: orphan, version: "3", owner: t@example.com, description: no allow rule names it}
spec:
  effect: read
  arguments: {type: object, properties: {text: {type: string}}}
  examples: [{arguments: {text: hi}}]
---
apiVersion: callgate/v1
kind: ToolContract
metadata: {name: echo, version: "2", owner: t@example.com, description: say something}
spec:
  effect: read
  arguments:
    type: object
    properties:
      text: {type: string}
      options:
        type: object
        properties:
          loud: {type: boolean}
  examples: [{arguments: {text: hi, options: {loud: true}}}]
---
apiVersion: callgate/v1
kind: ToolContract
metadata: {name: strict, version: "1", owner: t@example.com, description: reads a missing field}
spec:
  effect: read
  arguments: {type: object, required: [ticketId], properties: {ticketId: {type: string}}}
  lookups: [{name: ticket, collection: tickets, key: args.ticketId}]
  rules:
    - name: high-priority
      expression: ticket.priority == "high"
      error_class: conflict
      message: Only high-priority tickets can be escalated.
  examples: [{arguments: {ticketId: T-1}}]
---
apiVersion: callgate/v1
kind: ToolContract
metadata: {name: lenient-document, version: "1", owner: t@example.com, description: ignores errors}
spec:
  effect: read
  on_error: ignore
  arguments: {type: object, required: [ticketId], properties: {ticketId: {type: string}}}
  lookups: [{name: ticket, collection: tickets, key: args.ticketId}]
  rules:
    - name: high-priority
      expression: ticket.priority == "high"
      error_class: conflict
      message: Only high-priority tickets can be escalated.
  examples: [{arguments: {ticketId: T-1}}]
---
apiVersion: callgate/v1
kind: ToolContract
metadata: {name: lenient-rule, version: "1", owner: t@example.com, description: one rule ignores}
spec:
  effect: read
  arguments: {type: object, required: [ticketId], properties: {ticketId: {type: string}}}
  lookups: [{name: ticket, collection: tickets, key: args.ticketId}]
  rules:
    - name: high-priority
      expression: ticket.priority == "high"
      error_class: conflict
      on_error: ignore
      message: Only high-priority tickets can be escalated.
  examples: [{arguments: {ticketId: T-1}}]
---
apiVersion: callgate/v1
kind: ToolContract
metadata: {name: shadowed, version: "1", owner: t@example.com, description: rules in shadow}
spec:
  effect: read
  arguments: {type: object, properties: {text: {type: string}}}
  rules:
    - name: new-audit-rule
      expression: "false"
      error_class: invalid_argument
      mode: audit
      message: the audited rule would refuse this
    - name: new-warn-rule
      expression: "false"
      error_class: conflict
      mode: warn
      message: the warned rule would refuse this
  examples: [{arguments: {text: hi}}]
"""

TINY_ACCESS = """\
apiVersion: callgate/v1
kind: AccessPolicy
metadata: {name: tiny-access, version: "7", owner: t@example.com, description: test rights}
spec:
  rules:
    - name: blocked-text
      effect: deny
      tools: [echo]
      when: 'has(args.text) && args.text == "blocked"'
      message: That text is blocked here.
    - name: anyone
      effect: allow
      tools: [echo, strict, lenient-document, lenient-rule, shadowed]
      when: "true"
"""

TINY_WORLD = {"tickets": [{"id": "T-1", "tenant": "acme"}]}  # no ``priority`` field
TINY_ACTOR = {"id": "U-1", "tenant": "acme"}


@pytest.fixture(scope="module")
def limits_gate(tmp_path_factory: pytest.TempPathFactory, ref: Any, compile_gate: Any,
                reference_world: Any) -> Any:
    contracts, policies = ref.copy(tmp_path_factory.mktemp("limits"), SMALL_LIMITS_ROUTING)
    return compile_gate(contracts, policies, world=reference_world)


@pytest.fixture(scope="module")
def tiny_gate(tmp_path_factory: pytest.TempPathFactory, ref: Any, compile_gate: Any) -> Any:
    root = tmp_path_factory.mktemp("tiny")
    ref.write(root / "tools.yaml", TINY_TOOLS)
    ref.write(root / "access.yaml", TINY_ACCESS)
    return compile_gate(root, world=TINY_WORLD)


# malformed -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("output", "detail"),
    [
        pytest.param("Sure! I will create the follow-up now.", "not valid JSON", id="not-json"),
        pytest.param('{"name": "createFollowUp", "arguments": {', "not valid JSON",
                     id="truncated"),
        pytest.param({"answer": 42}, "no tool call found", id="no-call"),
        pytest.param({"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
                     "holds no tool call", id="anthropic-text-only"),
        pytest.param({"name": FOLLOW_UP, "arguments": '{"ticketId": "T-1001",'},
                     "arguments are not valid JSON", id="arguments-not-json"),
        pytest.param({"name": FOLLOW_UP, "arguments": '["T-1001"]'},
                     "must be a JSON object, not list", id="arguments-a-list"),
        pytest.param({"name": FOLLOW_UP, "arguments": "42"},
                     "must be a JSON object, not int", id="arguments-a-number"),
        pytest.param({"name": "", "arguments": {}}, "no tool name", id="empty-name"),
        pytest.param({"name": ["createFollowUp"], "arguments": {}}, "no tool name",
                     id="name-not-a-string"),
    ],
)
def test_malformed_output_asks_for_one_corrected_call(check: Any, output: Any, detail: str) -> None:
    decision = check(output)
    assert_refused(decision, "malformed", "regenerate", None)
    assert detail in decision.log["detail"]
    assert decision.agent_message.startswith("Your tool call could not be read: ")
    assert detail in decision.agent_message
    assert decision.agent_message.endswith("You may send one corrected call.")
    assert decision.user_message == "Something went wrong while preparing the action."


def test_several_calls_with_the_default_policy_take_none(check: Any, calls: Any) -> None:
    message = {"role": "assistant", "tool_calls": [
        calls.openai_tool_call(FOLLOW_UP, calls.follow_up_args(), "call_1"),
        calls.openai_tool_call("getTicketStatus", {"ticketId": "T-1001"}, "call_2"),
    ]}
    decision = check(message)
    assert_refused(decision, "malformed", "regenerate", None)
    assert decision.arguments is None and decision.call_id is None
    assert "2 tool calls (createFollowUp, getTicketStatus); none was run" in (
        decision.agent_message)
    assert "Propose exactly one call per message." in decision.agent_message


def test_several_calls_with_policy_first_take_the_first_and_note_it(
    limits_gate: Any, dana: Any, now: Any, calls: Any
) -> None:
    message = {"role": "assistant", "tool_calls": [
        calls.openai_tool_call(FOLLOW_UP, calls.follow_up_args(), "call_1"),
        calls.openai_tool_call("sendEmail", {"to": "x@evil.example"}, "call_2"),
    ]}
    decision = limits_gate.check(message, actor=dana, now=now)
    assert decision.route == "execute" and decision.error_class is None
    assert (decision.tool, decision.call_id) == (FOLLOW_UP, "call_1")
    assert decision.arguments == calls.follow_up_args()
    parse = next(entry for entry in decision.trace if entry.step == "parse")
    assert parse.detail == ("took the first of 2 calls (createFollowUp, sendEmail); "
                            "the others were not run")


def test_several_calls_with_policy_first_tell_the_model_the_others_did_not_run(
    limits_gate: Any, dana: Any, now: Any, calls: Any
) -> None:
    message = [calls.plain(FOLLOW_UP, calls.follow_up_args()),
               calls.plain("getTicketStatus", {"ticketId": "T-1001"})]
    decision = limits_gate.check(message, actor=dana, now=now)
    assert decision.route == "execute"
    assert "not run" in decision.agent_message
    assert "not run" in json.dumps(decision.log)


# unknown_tool and unexpected_argument ----------------------------------------------------------


def test_unknown_tool_is_refused_and_records_the_allowlist_versions(check: Any, gate: Any) -> None:
    decision = check({"name": "deleteTicket", "arguments": {"ticketId": "T-1001"}})
    assert_refused(decision, "unknown_tool", "refuse", None)
    assert decision.tool is None and decision.contract_version is None
    assert decision.log["tool"] == "deleteTicket"
    allowlist = {f"ToolContract/{name}": contract.version
                 for name, contract in gate.config.contracts.items()}
    assert ALL_CONTRACTS <= allowlist.keys()
    assert {k: v for k, v in decision.versions.items() if k.startswith("ToolContract/")} == (
        allowlist)
    assert decision.log["versions"] == decision.versions
    assert decision.agent_message == (
        "There is no tool named deleteTicket. Available tools: "
        f"{', '.join(sorted(gate.config.contracts))}. Do not retry this call.")


def test_unexpected_argument_names_the_field_and_records_the_contract_version(
    check: Any, calls: Any
) -> None:
    decision = check(calls.follow_up(priority="high"))
    assert_refused(decision, "unexpected_argument", "refuse", None)
    assert (decision.tool, decision.contract_version) == (FOLLOW_UP, "1.0.0")
    assert decision.versions["ToolContract/createFollowUp"] == "1.0.0"
    assert decision.log["contract_version"] == "1.0.0"
    assert "createFollowUp has no argument `priority`" in decision.agent_message
    assert "'priority' is not declared by createFollowUp v1.0.0" in decision.log["detail"]


def test_unexpected_nested_argument_names_the_dotted_path(
    tiny_gate: Any, calls: Any, now: Any
) -> None:
    output = calls.plain("echo", {"text": "hi", "options": {"loud": True, "colour": "red"}})
    decision = tiny_gate.check(output, actor=TINY_ACTOR, now=now)
    assert_refused(decision, "unexpected_argument", "refuse", None)
    assert "echo has no argument `options.colour`" in decision.agent_message
    assert (decision.contract_version, decision.versions["ToolContract/echo"]) == ("2", "2")


# invalid_argument ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "field", "problem", "valid"),
    [
        pytest.param({"ticketId": 1001}, "ticketId", "1001 is not of type string",
                     'matching ^T-[0-9]{3,8}$; for example "T-1001"', id="wrong-type"),
        pytest.param({"assigneeId": "dana"}, "assigneeId", '"dana" does not match ^U-[0-9]{1,8}$',
                     'such as U-7; a string; matching ^U-[0-9]{1,8}$', id="bad-pattern"),
        pytest.param({"dueAt": "next Tuesday"}, "dueAt", '"next Tuesday" is not a valid date-time',
                     "RFC 3339, e.g. 2026-12-01T09:00:00Z", id="bad-date-time"),
        pytest.param({"dueAt": "2026-02-30T09:00:00Z"}, "dueAt", "is not a valid date-time",
                     "RFC 3339", id="impossible-date"),
        pytest.param({"dueAt": None}, "dueAt", "it is required but missing",
                     'for example "2026-12-15T09:00:00Z"', id="missing-required"),
    ],
)
def test_schema_violation_names_the_field_and_a_valid_value(
    check: Any, calls: Any, changes: dict[str, Any], field: str, problem: str, valid: str
) -> None:
    decision = check(calls.follow_up(**changes))
    assert_refused(decision, "invalid_argument", "regenerate", "createFollowUp/schema")
    agent = decision.agent_message
    assert agent.startswith(f"Argument `{field}` of createFollowUp is invalid: ")
    assert problem in agent
    assert "A valid value: " in agent and valid in agent
    assert "You may send one corrected call." in agent
    assert 'A valid call looks like: createFollowUp({"ticketId": "T-1001"' in agent
    assert decision.user_message == "Some details of the request weren't valid."


@pytest.mark.parametrize(
    ("changes", "rule", "text"),
    [
        pytest.param({"dueAt": "2026-11-28T09:00:00Z"}, "due-in-future",
                     "dueAt 2026-11-28T09:00:00Z is in the past", id="past-date"),
        pytest.param({"assigneeId": "U-8"}, "assignee-in-team",
                     "U-8 is not in the ticket's team", id="assignee-not-in-team"),
    ],
)
def test_business_rule_violation_is_an_invalid_argument(
    check: Any, calls: Any, changes: dict[str, Any], rule: str, text: str
) -> None:
    decision = check(calls.follow_up(**changes))
    assert_refused(decision, "invalid_argument", "regenerate", f"createFollowUp/{rule}")
    assert decision.agent_message.startswith(text)
    assert "You may send one corrected call." in decision.agent_message


def test_a_due_date_one_second_after_now_is_accepted(check: Any, calls: Any) -> None:
    assert check(calls.follow_up(dueAt="2026-11-29T12:00:01Z")).route == "execute"
    past = check(calls.follow_up(dueAt="2026-11-29T12:00:00Z"))
    assert past.rule == "createFollowUp/due-in-future"


def test_lower_case_rfc3339_date_time_is_not_called_a_past_date(check: Any, calls: Any) -> None:
    decision = check(calls.follow_up(dueAt="2026-12-15t09:00:00z"))
    assert decision.route == "execute" or decision.rule == "createFollowUp/schema"


def test_agent_message_for_an_over_long_value_stays_short(check: Any, calls: Any) -> None:
    decision = check(calls.follow_up(note="x" * 19_000))
    assert decision.rule == "createFollowUp/schema"
    assert len(decision.agent_message) < 1_000


# not_found, ambiguous, conflict ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ticket", "rule"),
    [("T-9999", "createFollowUp/lookup.ticket"), ("T-1003", "createFollowUp/ticket-not-deleted")],
    ids=["missing", "deleted"],
)
def test_missing_or_deleted_ticket_is_not_found(
    check: Any, calls: Any, ticket: str, rule: str
) -> None:
    decision = check(calls.follow_up(ticketId=ticket))
    assert_refused(decision, "not_found", "replan", rule)
    # The rights depend on two records (ticket and assignee): the message names both and
    # never which one failed, so "missing", "deleted" and "not yours" read the same.
    assert decision.agent_message == (
        f"Not every record you referred to is available to you (ticket {ticket}, assignee "
        "U-7). Check these values with the user; do not guess others. Do not repeat this "
        "call; choose another step.")
    assert decision.user_message == NOT_FOUND_USER
    assert "Deleted by mistake" not in decision.agent_message + decision.user_message


OWNED_TICKETS = """\
apiVersion: callgate/v1
kind: ToolContract
metadata: {name: escalate, version: "1", owner: t@example.com, description: owner's key}
spec:
  effect: read
  arguments: {type: object, required: [ticketId], properties: {ticketId: {type: string}}}
  lookups:
    - {name: ticket, collection: tickets, key: args.ticketId}
    - {name: owner, collection: people, key: ticket.owner_id}
  examples: [{arguments: {ticketId: T-1}}]
---
apiVersion: callgate/v1
kind: AccessPolicy
metadata: {name: owners, version: "1", owner: t@example.com, description: rights}
spec:
  rules:
    - name: own-tenant
      effect: allow
      tools: [escalate]
      when: ticket.tenant == actor.tenant && owner.tenant == actor.tenant
"""


def test_a_key_read_from_a_hidden_record_is_never_shown(tmp_path: Path, ref: Any,
                                                        compile_gate: Any, now: Any) -> None:
    """The owner's key comes from the ticket: showing it would tell another tenant's ticket
    (its owner's ID) from a missing one (nothing to show)."""
    ref.write(tmp_path / "owned.yaml", OWNED_TICKETS)
    world = {"tickets": [{"id": "T-3", "tenant": "globex", "owner_id": "P-3"}],
             "people": [{"id": "P-3", "tenant": "globex"}]}
    gate = compile_gate(tmp_path, world=world)
    actor = {"id": "U-1", "tenant": "acme"}
    missing = gate.check({"name": "escalate", "arguments": {"ticketId": "T-9"}},
                         actor=actor, now=now)
    hidden = gate.check({"name": "escalate", "arguments": {"ticketId": "T-3"}},
                        actor=actor, now=now)
    assert (missing.error_class, hidden.error_class) == ("not_found", "forbidden")
    assert missing.agent_message.replace("T-9", "T-3") == hidden.agent_message
    assert "P-3" not in hidden.agent_message and "(ticket T-3, owner)" in hidden.agent_message


def test_ambiguous_contact_offers_permitted_fields_of_own_tenant_candidates(check: Any) -> None:
    decision = check({"name": "createEvent", "arguments": {
        "contact": "Anna Petrova", "title": "Renewal call", "startsAt": "2026-12-10T14:00:00Z"}})
    assert_refused(decision, "ambiguous", "clarify", "createEvent/lookup.contact")
    assert [dict(c) for c in decision.candidates] == [
        {"id": "C-12", "name": "Anna Petrova", "company": "Northwind"},
        {"id": "C-13", "name": "Anna Petrova", "company": "Contoso"},
    ]
    text = decision.agent_message + decision.user_message + json.dumps(decision.as_dict())
    for secret in ("C-40", "Globex Partner", "globex", "anna@globex-partner.example",
                   "anna.petrova@northwind.example"):
        assert secret not in text
    assert "Ask the user to choose" in decision.agent_message


def test_closed_ticket_is_a_conflict_with_a_clear_reason(check: Any, calls: Any) -> None:
    decision = check(calls.follow_up(ticketId="T-1002"))
    assert_refused(decision, "conflict", "refuse", "createFollowUp/ticket-open")
    assert decision.agent_message == (
        "Ticket T-1002 is closed, so it cannot get a follow-up. Do not retry this call.")
    assert decision.user_message == (
        "That ticket is closed; reopen it first if a follow-up is still needed.")


# forbidden -------------------------------------------------------------------------------------


def test_another_tenants_ticket_is_forbidden(check: Any, calls: Any) -> None:
    decision = check(calls.follow_up(ticketId="T-2001"))
    assert_refused(decision, "forbidden", "refuse", "default-deny")
    assert decision.log["error_class"] == "forbidden"


def test_email_to_an_address_from_nowhere_is_forbidden(check: Any) -> None:
    decision = check({"name": "sendEmail", "arguments": {
        "to": "billing@attacker.example", "subject": "Invoice", "body": "Please pay here."}})
    assert_refused(decision, "forbidden", "refuse", "sendEmail/recipient-allowed")
    assert decision.agent_message.startswith(
        "billing@attacker.example is not an address this process allows")
    assert decision.user_message == "That address isn't one I'm allowed to e-mail."


def test_email_to_another_tenants_contact_is_forbidden(check: Any) -> None:
    decision = check({"name": "sendEmail", "arguments": {
        "to": "anna@globex-partner.example", "subject": "Hi", "body": "Hello"}})
    assert_refused(decision, "forbidden", "refuse", "sendEmail/recipient-allowed")


def test_invoice_of_an_organization_the_actor_does_not_have_is_forbidden(check: Any) -> None:
    decision = check({"name": "getInvoice", "arguments": {
        "invoiceNumber": "INV-2026-0043", "organizationId": "org-contoso"}})
    assert_refused(decision, "forbidden", "refuse", "default-deny")
    assert "80.00" not in decision.agent_message and "80.0" not in decision.agent_message
    allowed = check({"name": "getInvoice", "arguments": {
        "invoiceNumber": "INV-2026-0042", "organizationId": "org-northwind"}})
    assert allowed.route == "execute"
    assert allowed.rule == "support-desk-access/invoices-of-own-organizations"


def test_suspended_actor_deny_beats_the_matching_allow(
    check: Any, calls: Any, dana: dict[str, Any]
) -> None:
    allowed = check(calls.follow_up())
    assert allowed.rule == "support-desk-access/follow-up-own-tenant"  # the allow matches ...
    decision = check(calls.follow_up(), actor={**dana, "suspended": True})
    assert_refused(decision, "forbidden", "refuse", "support-desk-access/suspended-actors")
    assert decision.agent_message == ("Your account is suspended, so no action can be taken "
                                      "for you. Do not retry this call.")
    assert not any(e.subject == "support-desk-access/follow-up-own-tenant" and e.result == "allow"
                   for e in decision.trace)


@pytest.mark.parametrize(
    "actor",
    [
        pytest.param({"id": "U-7", "tenant": "acme"}, id="no-role"),
        pytest.param({"id": "U-7", "tenant": "acme", "role": "admin"}, id="role-not-in-enum"),
        pytest.param({"id": 7, "tenant": "acme", "role": "agent"}, id="id-not-a-string"),
        pytest.param({"id": "U-7", "tenant": "acme", "role": "agent", "suspended": "no"},
                     id="suspended-not-boolean"),
    ],
)
def test_actor_failing_the_actor_schema_is_never_trusted(
    check: Any, calls: Any, actor: dict[str, Any]
) -> None:
    decision = check(calls.follow_up(), actor=actor)
    assert_refused(decision, "forbidden", "refuse", "actor-schema")
    assert "actor schema" in decision.log["detail"]


# confirmation_required and execute ----------------------------------------------------------------


def test_email_to_a_known_contact_awaits_confirmation(check: Any) -> None:
    decision = check({"name": "sendEmail", "arguments": {
        "to": "anna.petrova@northwind.example", "subject": "Your ticket", "body": "Hello Anna"}})
    # the contract's confirmation decides, not the allow rule that let the call through
    assert_refused(decision, "confirmation_required", "await_confirmation",
                   "sendEmail/confirmation")
    assert "allowed by support-desk-access/agents-send-email" in decision.log["detail"]
    assert "wait for the user's decision" in decision.agent_message
    assert decision.log["arguments"]["body"] == "***"  # masked in the log ...
    assert decision.arguments["body"] == "Hello Anna"  # ... not in the decision


def test_ordinary_ticket_is_executed(check: Any, calls: Any, ref: Any) -> None:
    decision = check(ref.call_file.read_text(encoding="utf-8"))
    assert decision.route == "execute" and decision.error_class is None and decision.allowed
    assert (decision.tool, decision.contract_version) == (FOLLOW_UP, "1.0.0")
    assert decision.rule == "support-desk-access/follow-up-own-tenant"
    assert decision.agent_message == "All checks passed for createFollowUp."
    assert decision.arguments == calls.follow_up_args()
    assert decision.call_id == "call_1"


# Input formats -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "fmt", "call_id"),
    [
        ("openai_chat", "openai-chat", "call_a"),
        ("openai_completion", "openai-chat", "call_b"),
        ("openai_tool_calls", "openai-chat", "call_c"),
        ("responses_item", "openai-responses", "call_d"),
        ("responses", "openai-responses", "call_e"),
        ("tool_use", "anthropic", "toolu_f"),
        ("anthropic", "anthropic", "toolu_g"),
        ("plain_object", "plain", "h"),
        ("plain_string", "plain", "i"),
    ],
)
@pytest.mark.parametrize("encoding", ["object", "json-text", "bytes"])
def test_every_input_format_gives_the_same_call(
    check: Any, calls: Any, build: str, fmt: str, call_id: str, encoding: str
) -> None:
    arguments = calls.follow_up_args(note="call back")
    if build == "openai_tool_calls":
        output: Any = [calls.openai_tool_call(FOLLOW_UP, arguments, call_id)]
    elif build == "plain_object":
        output = calls.plain(FOLLOW_UP, arguments, call_id)
    elif build == "plain_string":
        output = calls.plain(FOLLOW_UP, json.dumps(arguments), call_id)
    else:
        output = getattr(calls, build)(FOLLOW_UP, arguments, call_id)
    if encoding != "object":
        output = json.dumps(output)
        output = output.encode("utf-8") if encoding == "bytes" else output
    decision = check(output)
    assert decision.route == "execute", decision.agent_message
    assert decision.arguments == arguments
    assert decision.call_id == call_id
    assert decision.trace[0].step == "propose" and decision.trace[0].result == fmt
    assert decision.log["arguments"]["note"] == "***"


def test_responses_call_id_is_preferred_over_the_item_id(check: Any, calls: Any) -> None:
    item = calls.responses_item(FOLLOW_UP, calls.follow_up_args(), "call_77")
    assert item["id"] == "fc_1"
    assert check(item).call_id == "call_77"


# Bounds (a routing table with small limits) -------------------------------------------------------


@pytest.fixture
def limited(limits_gate: Any, dana: Any, now: Any) -> Any:
    def run(output: Any) -> Decision:
        decision: Decision = limits_gate.check(output, actor=dana, now=now)
        return decision

    return run


def test_small_limits_gate_accepts_the_ordinary_call(limited: Any, calls: Any) -> None:
    decision = limited(json.dumps(calls.openai_chat(FOLLOW_UP, calls.follow_up_args())))
    assert decision.route == "execute"
    assert decision.versions["RoutingTable/small-limits"] == "9.1.0"


@pytest.mark.parametrize("as_bytes", [False, True], ids=["text", "bytes"])
def test_max_bytes_bounds_the_whole_output(limited: Any, calls: Any, as_bytes: bool) -> None:
    text = json.dumps(calls.openai_chat(FOLLOW_UP, calls.follow_up_args()))
    padded = text + " " * (1024 - len(text))
    assert limited(padded.encode() if as_bytes else padded).route == "execute"  # at the limit
    decision = limited((padded + " ").encode() if as_bytes else padded + " ")
    assert_refused(decision, "malformed", "regenerate", None)
    assert decision.log["detail"] == "model output is 1025 bytes, more than the limit of 1024"


def test_max_bytes_bounds_the_arguments_string(limited: Any, calls: Any) -> None:
    arguments = json.dumps(calls.follow_up_args())
    decision = limited(calls.plain(FOLLOW_UP, arguments + " " * (1025 - len(arguments))))
    assert_refused(decision, "malformed", "regenerate", None)
    assert decision.log["detail"] == "arguments are 1025 bytes, more than the limit of 1024"
    assert (decision.tool, decision.contract_version) == (FOLLOW_UP, "1.0.0")
    at_limit = limited(calls.plain(FOLLOW_UP, arguments + " " * (1024 - len(arguments))))
    assert at_limit.route == "execute"


def test_max_bytes_bounds_arguments_given_as_an_object(limited: Any, calls: Any) -> None:
    arguments = {f"k{i}": "v" * 90 for i in range(20)}  # ~2 KB, each string under the limit
    as_string = limited(calls.openai_chat(FOLLOW_UP, arguments))
    assert as_string.error_class == "malformed"
    as_object = limited(calls.anthropic(FOLLOW_UP, arguments))
    assert as_object.error_class == "malformed"


def test_max_depth_bounds_nesting(limited: Any, calls: Any) -> None:
    at_limit = limited(calls.follow_up(note={"a": {"b": "deep"}}))  # depth 4
    assert at_limit.error_class == "invalid_argument"  # bounded fine; the schema refuses it
    decision = limited(calls.follow_up(note={"a": {"b": {"c": "deeper"}}}))  # depth 5
    assert_refused(decision, "malformed", "regenerate", None)
    assert decision.log["detail"] == "arguments are nested deeper than the limit of 4"
    assert decision.tool == FOLLOW_UP


@pytest.mark.parametrize("where", ["value", "key"])
def test_max_string_length_bounds_values_and_keys(limited: Any, calls: Any, where: str) -> None:
    ok = limited(calls.follow_up(note="n" * 100))
    assert ok.route == "execute"
    if where == "value":
        decision = limited(calls.follow_up(note="n" * 101))
        detail = "a string of 101 characters is longer than the limit of 100"
    else:
        decision = limited(calls.plain(FOLLOW_UP, {**calls.follow_up_args(), "k" * 101: 1}))
        detail = "a key of 101 characters is longer than the limit of 100"
    assert_refused(decision, "malformed", "regenerate", None)
    assert decision.log["detail"] == detail


def test_max_calls_bounds_the_number_of_calls(limited: Any, calls: Any) -> None:
    three = [calls.plain(FOLLOW_UP, calls.follow_up_args()) for _ in range(3)]
    assert limited(three).route == "execute"  # within max_calls, the first is taken
    decision = limited([*three, calls.plain("getTicketStatus", {"ticketId": "T-1001"})])
    assert_refused(decision, "malformed", "regenerate", None)
    assert decision.log["detail"] == "the message holds 4 calls, more than the limit of 3"


def test_deep_nesting_in_the_output_is_malformed_not_a_crash(check: Any) -> None:
    decision = check("[" * 5000 + "]" * 5000)
    assert_refused(decision, "malformed", "regenerate", None)


# Default deny, deny-overrides, evaluation errors, shadow modes (a tiny config) --------------------


def test_default_deny_when_no_allow_rule_names_the_tool(tiny_gate: Any, now: Any) -> None:
    decision = tiny_gate.check({"name": "orphan", "arguments": {"text": "hi"}},
                               actor=TINY_ACTOR, now=now)
    assert_refused(decision, "forbidden", "refuse", "default-deny")
    assert decision.versions == {"ToolContract/orphan": "3", "AccessPolicy/tiny-access": "7"}
    assert any(e.step == "authorize" and e.result == "deny" for e in decision.trace)
    assert decision.agent_message.startswith("You are not allowed to call orphan for this user.")


def test_deny_overrides_a_matching_allow(tiny_gate: Any, now: Any) -> None:
    allowed = tiny_gate.check({"name": "echo", "arguments": {"text": "hello"}},
                              actor=TINY_ACTOR, now=now)
    assert (allowed.route, allowed.rule) == ("execute", "tiny-access/anyone")
    decision = tiny_gate.check({"name": "echo", "arguments": {"text": "blocked"}},
                               actor=TINY_ACTOR, now=now)
    assert_refused(decision, "forbidden", "refuse", "tiny-access/blocked-text")
    assert decision.agent_message == "That text is blocked here. Do not retry this call."


def test_rule_that_fails_to_evaluate_fails_closed(tiny_gate: Any, now: Any) -> None:
    decision = tiny_gate.check({"name": "strict", "arguments": {"ticketId": "T-1"}},
                               actor=TINY_ACTOR, now=now)
    assert_refused(decision, "conflict", "refuse", "strict/high-priority")
    assert "priority" in decision.log["evaluation_error"]
    assert decision.log["rule"] == "strict/high-priority"
    assert "failed to evaluate" in decision.log["detail"]
    rule = next(e for e in decision.trace if e.subject == "rule high-priority")
    assert rule.result == "error" and "fail_closed" in rule.detail


@pytest.mark.parametrize("tool", ["lenient-document", "lenient-rule"])
def test_on_error_ignore_skips_the_rule(tiny_gate: Any, now: Any, tool: str) -> None:
    decision = tiny_gate.check({"name": tool, "arguments": {"ticketId": "T-1"}},
                               actor=TINY_ACTOR, now=now)
    assert decision.route == "execute" and decision.error_class is None
    assert "evaluation_error" not in decision.log
    rule = next(e for e in decision.trace if e.subject == "rule high-priority")
    assert "(ignore)" in rule.detail


def test_audit_and_warn_rules_do_not_change_the_route(tiny_gate: Any, now: Any) -> None:
    """Both shadow modes record the verdict without enforcing it: ``warn`` as a warning on
    the decision, ``audit`` only in the log (documents.Mode)."""
    decision = tiny_gate.check({"name": "shadowed", "arguments": {"text": "hi"}},
                               actor=TINY_ACTOR, now=now)
    assert decision.route == "execute" and decision.error_class is None
    assert [(w.rule, w.mode, w.error_class, w.message) for w in decision.warnings] == [
        ("shadowed/new-warn-rule", "warn", "conflict", "the warned rule would refuse this")]
    assert [(v["rule"], v["mode"], v["error_class"]) for v in decision.log["shadow"]] == [
        ("shadowed/new-audit-rule", "audit", "invalid_argument"),
        ("shadowed/new-warn-rule", "warn", "conflict"),
    ]
    audit = next(e for e in decision.trace if e.subject == "rule new-audit-rule")
    assert (audit.result, audit.detail) == ("fail", "audit")


# Non-disclosure -----------------------------------------------------------------------------------


def _messages(decision: Decision, hide: str) -> tuple[str, str]:
    """Both model- and person-facing texts with the ID the model sent replaced."""
    return (decision.agent_message.replace(hide, "<ID>"),
            decision.user_message.replace(hide, "<ID>"))


SECRETS_OF_T2001 = ("globex", "Globex", "billing", "confidential", "dispute")


@pytest.mark.parametrize("tool", [FOLLOW_UP, "getTicketStatus"])
def test_another_tenants_ticket_reads_exactly_like_a_missing_one(
    check: Any, calls: Any, tool: str
) -> None:
    def ask(ticket: str) -> Decision:
        if tool == FOLLOW_UP:
            return check(calls.follow_up(ticketId=ticket))
        return check({"name": tool, "arguments": {"ticketId": ticket}})

    hidden, missing = ask("T-2001"), ask("T-9999")
    assert (hidden.error_class, missing.error_class) == ("forbidden", "not_found")
    assert _messages(hidden, "T-2001") == _messages(missing, "T-9999")
    for secret in SECRETS_OF_T2001:
        assert secret not in hidden.agent_message + hidden.user_message
    assert hidden.candidates == () and hidden.agent_message.count("T-2001") == 1


def test_another_tenants_deleted_ticket_reads_exactly_like_a_missing_one(
    gate_with_world: Any, reference_world: Any, dana: Any, now: Any, calls: Any
) -> None:
    world = copy.deepcopy(reference_world)
    world["tickets"].append({"id": "T-2002", "tenant": "globex", "team": "legal",
                             "status": "open", "subject": "Globex merger",
                             "deleted_at": "2026-11-01T00:00:00Z"})
    gate = gate_with_world(world)
    hidden = gate.check(calls.follow_up(ticketId="T-2002"), actor=dana, now=now)
    missing = gate.check(calls.follow_up(ticketId="T-9999"), actor=dana, now=now)
    own_deleted = gate.check(calls.follow_up(ticketId="T-1003"), actor=dana, now=now)
    assert hidden.error_class == "forbidden"
    assert _messages(hidden, "T-2002") == _messages(missing, "T-9999")
    assert _messages(own_deleted, "T-1003") == _messages(missing, "T-9999")
    for secret in ("globex", "legal", "merger"):
        assert secret not in (hidden.agent_message + hidden.user_message).lower()


def test_another_tenants_assignee_reads_exactly_like_a_missing_one(check: Any, calls: Any) -> None:
    hidden = check(calls.follow_up(assigneeId="U-90"))
    missing = check(calls.follow_up(assigneeId="U-9999"))
    assert hidden.error_class == "forbidden"
    assert _messages(hidden, "U-90") == _messages(missing, "U-9999")


# Every decision carries the three messages, the versions and a trace ------------------------------

SCENARIOS: dict[str, Any] = {
    "malformed": "not json",
    "unknown_tool": {"name": "nope", "arguments": {}},
    "unexpected_argument": {"name": FOLLOW_UP, "arguments": {"x": 1}},
    "invalid_argument": {"name": FOLLOW_UP, "arguments": {"ticketId": "T-1001"}},
    "not_found": {"name": "getTicketStatus", "arguments": {"ticketId": "T-9999"}},
    "ambiguous": {"name": "createEvent", "arguments": {
        "contact": "Anna Petrova", "title": "Call", "startsAt": "2026-12-10T14:00:00Z"}},
    "forbidden": {"name": "getTicketStatus", "arguments": {"ticketId": "T-2001"}},
    "conflict": {"name": FOLLOW_UP, "arguments": {
        "ticketId": "T-1002", "assigneeId": "U-7", "dueAt": "2026-12-15T09:00:00Z"}},
    "confirmation_required": {"name": "sendEmail", "arguments": {
        "to": "boris@northwind.example", "subject": "Hi", "body": "Hello"}},
    "execute": {"name": "getTicketStatus", "arguments": {"ticketId": "T-1001"}},
}


@pytest.mark.parametrize("outcome", sorted(SCENARIOS))
def test_every_decision_carries_messages_versions_and_a_trace(
    check: Any, gate: Any, outcome: str
) -> None:
    decision = check(SCENARIOS[outcome])
    assert (decision.error_class or "execute") == outcome
    assert decision.route in Route
    assert decision.agent_message.strip()
    if decision.error_class is not None:
        assert decision.user_message.strip()
    else:
        assert isinstance(decision.user_message, str)
    log = decision.log
    assert log["route"] == decision.route and log["error_class"] == decision.error_class
    assert log["versions"] == decision.versions
    policy_versions = {ref.key: ref.version for ref in gate.config.documents
                       if ref.kind in ("AccessPolicy", "RoutingTable")}
    assert {"AccessPolicy/support-desk-access", "RoutingTable/support-desk-routing"} <= (
        policy_versions.keys())
    assert policy_versions.items() <= decision.versions.items()
    if decision.tool is not None:
        assert decision.versions[f"ToolContract/{decision.tool}"] == decision.contract_version
        assert log["contract_version"] == decision.contract_version
    assert log["actor"] == {"id": "U-7", "tenant": "acme", "role": "agent"}
    assert decision.trace[-1].step == "route" and decision.trace[-1].result == decision.route
    if outcome != "malformed":  # a proposal that could not be read has no propose entry
        assert decision.trace[0].step == "propose"
    json.dumps(decision.as_dict(), default=str)  # the CLI's JSON shape is serialisable


# Known crashes on hostile model output ------------------------------------------------------------


def test_lone_surrogate_in_arguments_is_malformed_not_a_crash(check: Any) -> None:
    decision = check('{"name": "createFollowUp", "arguments": "\\ud800"}')
    assert decision.error_class == "malformed"


def test_huge_integer_literal_is_handled_not_a_crash(check: Any) -> None:
    decision = check('{"name": "createFollowUp", "arguments": {"note": ' + "9" * 5000 + "}}")
    assert decision.route in Route


# Properties ---------------------------------------------------------------------------------------

VALID_STRINGS = ["T-1001", "T-1002", "T-1003", "T-2001", "T-9999", "U-7", "U-8", "U-90",
                 "2026-12-15T09:00:00Z", "2020-01-01T00:00:00Z", "anna.petrova@northwind.example"]
# Integers stay within 64 bits: longer literals hit the known json.loads crash (xfail above).
JSON_SCALARS = (st.none() | st.booleans() | st.integers(-(2**63), 2**63)
                | st.floats(allow_nan=False, allow_infinity=False)
                | st.text(max_size=12) | st.sampled_from(VALID_STRINGS))
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                max_size=3),
    max_leaves=8,
)
FIELDS = st.sampled_from(["ticketId", "assigneeId", "dueAt", "note", "to", "subject", "body"])
ARGUMENTS = st.dictionaries(FIELDS | st.text(max_size=8), JSON_VALUES, max_size=5)
TOOLS = st.sampled_from([FOLLOW_UP, "getTicketStatus", "sendEmail", "searchContacts", "nope"])


@settings(PROPERTY_SETTINGS, max_examples=40)
@given(tool=TOOLS, arguments=ARGUMENTS)
def test_property_every_envelope_of_a_call_gets_the_same_verdict(
    gate: Any, dana: Any, now: Any, calls: Any, tool: str, arguments: dict[str, Any]
) -> None:
    verdicts = {
        (d.route, d.error_class, d.rule)
        for d in (
            gate.check(build(tool, arguments), actor=dana, now=now)
            for build in (calls.plain, calls.openai_chat, calls.anthropic, calls.responses)
        )
    }
    assert len(verdicts) == 1, verdicts


CALL_KEYS = st.sampled_from(["name", "arguments", "input", "type", "id", "call_id", "function",
                             "tool_calls", "choices", "message", "output", "content", "role"])
CALL_LIKE = st.recursive(
    JSON_SCALARS | st.sampled_from(["function", "function_call", "tool_use", "assistant",
                                    FOLLOW_UP, '{"ticketId": "T-1001"}']),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(CALL_KEYS, inner, max_size=4),
    max_leaves=12,
)
MODEL_OUTPUT = st.one_of(
    CALL_LIKE,
    CALL_LIKE.map(json.dumps),
    JSON_VALUES.map(json.dumps),
    st.text(max_size=200),
    st.binary(max_size=200),
    CALL_LIKE.map(lambda value: json.dumps(value).encode("utf-8")),
)


@settings(PROPERTY_SETTINGS, max_examples=100)
@given(output=MODEL_OUTPUT)
def test_property_check_never_raises_on_model_output(
    gate: Any, dana: Any, now: Any, output: Any
) -> None:
    decision = gate.check(output, actor=dana, now=now)
    assert isinstance(decision, Decision)
    assert decision.route in Route
    assert decision.error_class is None or decision.error_class in ErrorClass
    assert decision.agent_message


@pytest.fixture(scope="module")
def hidden_ticket_messages(gate: Any, dana: Any, now: Any, calls: Any) -> dict[str, Any]:
    """The messages for T-2001 (another tenant's ticket), per tool, computed once."""
    return {
        FOLLOW_UP: _messages(gate.check(calls.follow_up(ticketId="T-2001"), actor=dana, now=now),
                             "T-2001"),
        "getTicketStatus": _messages(gate.check(
            {"name": "getTicketStatus", "arguments": {"ticketId": "T-2001"}},
            actor=dana, now=now), "T-2001"),
    }


WORLD_TICKET_NUMBERS = {1001, 1002, 1003, 2001}


@settings(PROPERTY_SETTINGS, max_examples=40)
@given(number=st.integers(0, 99_999_999).filter(lambda n: n not in WORLD_TICKET_NUMBERS),
       width=st.integers(3, 8), tool=st.sampled_from([FOLLOW_UP, "getTicketStatus"]))
def test_property_missing_ticket_reads_like_another_tenants_ticket(
    gate: Any, dana: Any, now: Any, calls: Any, hidden_ticket_messages: dict[str, Any],
    number: int, width: int, tool: str,
) -> None:
    ticket = f"T-{number:0{width}d}"  # well-formed: 3 to 8 digits, never a world ticket
    assert re.fullmatch(r"T-[0-9]{3,8}", ticket)
    output = (calls.follow_up(ticketId=ticket) if tool == FOLLOW_UP
              else {"name": tool, "arguments": {"ticketId": ticket}})
    decision = gate.check(output, actor=dana, now=now)
    assert decision.error_class == "not_found"
    assert _messages(decision, ticket) == hidden_ticket_messages[tool]
