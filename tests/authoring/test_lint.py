"""``callgate lint``: findings on deliberately broken documents, at the exact place to edit.

Each test writes a small configuration to ``tmp_path``: a clean access policy and routing
table, plus one contract with one defect. Expected places are found by searching the
written text for a marker, so a test names *what* it points at, not a hand-counted number.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from callgate_rules.authoring.lint import lint
from callgate_rules.cli import main
from callgate_rules.documents.compiler import Finding

POLICY = """\
apiVersion: callgate/v1
kind: AccessPolicy
metadata: {name: lint-access, version: "1", owner: t@example.com, description: everyone}
spec:
  actor:
    type: object
    required: [id, tenant]
    properties:
      id: {type: string}
      tenant: {type: string}
      nickname: {type: string}
  rules:
    - name: anyone
      effect: allow
      tools: ["*"]
      when: "true"
"""

ROUTES = """\
    malformed: regenerate
    unknown_tool: refuse
    unexpected_argument: refuse
    invalid_argument: regenerate
    not_found: replan
    ambiguous: clarify
    forbidden: refuse
    conflict: refuse
    confirmation_required: await_confirmation
    transient: retry
    unknown_outcome: reconcile
    duplicate: return_receipt
    permanent: refuse
    answer_too_large: replan
    reconcile_failed: review
    budget_exhausted: review
"""

ROUTING = f"""\
apiVersion: callgate/v1
kind: RoutingTable
metadata: {{name: lint-routing, version: "1", owner: t@example.com, description: all routes}}
spec:
  routes:
{ROUTES}"""

# A clean contract; tests replace one marked line (or add lines) to break it.
CONTRACT = """\
apiVersion: callgate/v1
kind: ToolContract
metadata:
  name: closeTicket
  version: "1.0.0"
  owner: t@example.com
  description: close a ticket
spec:
  effect: write
  idempotency: key
  arguments:
    type: object
    required: [ticketId]
    properties:
      ticketId: {type: string, pattern: "^T-[0-9]+$"}
      reason: {type: string}
  lookups:
    - name: ticket
      collection: tickets
      key: args.ticketId
      visible: record.tenant == actor.tenant
      schema:
        type: object
        additionalProperties: false
        required: [id, tenant, status]
        properties:
          id: {type: string}
          tenant: {type: string}
          status: {type: string}
          closed_at: {type: string}
  rules:
    - expression: ticket.status != "closed"
      name: not-closed
      error_class: conflict
      message: Ticket {args.ticketId} is already closed.
  examples:
    - arguments: {ticketId: T-1, reason: done}
"""

RULE = '    - expression: ticket.status != "closed"\n'


def place(text: str, marker: str, nth: int = 1) -> tuple[int, int]:
    """(line, column), 1-based, of the ``nth`` occurrence of ``marker`` in ``text``."""
    seen = 0
    for number, line in enumerate(text.splitlines(), start=1):
        column = line.find(marker)
        while column >= 0:
            seen += 1
            if seen == nth:
                return number, column + 1
            column = line.find(marker, column + 1)
    raise AssertionError(f"{marker!r} not in the text")


def summary(findings: list[Finding]) -> list[tuple[str, int, int, str, str]]:
    return [(Path(f.location.path).name, f.location.line, f.location.column, f.severity, f.code)
            for f in findings]


@pytest.fixture
def project(tmp_path: Path) -> Any:
    """Write documents beside a clean policy and routing table; ``run`` lints them all."""

    class Project:
        root = tmp_path

        @staticmethod
        def write(name: str, text: str) -> Path:
            path = tmp_path / name
            path.write_text(text, encoding="utf-8")
            return path

        @staticmethod
        def run(*names: str, policy: str = POLICY, routing: str = ROUTING) -> list[Finding]:
            Project.write("policy.yaml", policy)
            Project.write("routing.yaml", routing)
            return lint([tmp_path / n for n in (*names, "policy.yaml", "routing.yaml")])

    return Project


def test_the_clean_fixture_documents_lint_clean(project: Any) -> None:
    project.write("contract.yaml", CONTRACT)
    assert project.run("contract.yaml") == []


def test_reference_configuration_lints_clean(ref: Any) -> None:
    assert lint([ref.contracts, ref.policies]) == []


def test_reference_notes_suggest_schemas_for_the_records_read_without_one(
    ref: Any, tmp_path: Path
) -> None:
    """Every reference look-up declares its record schema, so notes are clean; take
    getInvoice's away and the note (asked for) points at that look-up's name."""
    assert lint([ref.contracts, ref.policies], notes=True) == []
    contracts = tmp_path / "contracts"
    shutil.copytree(ref.contracts, contracts)
    invoice_file = contracts / "getInvoice.yaml"
    document = invoice_file.read_text()
    schema_start = document.index("      schema:\n")
    schema_end = document.index("  verify:")
    invoice_file.write_text(document[:schema_start] + document[schema_end:])
    findings = lint([contracts, ref.policies], notes=True)
    assert [(Path(f.location.path).name, f.severity, f.code) for f in findings] == [
        ("getInvoice.yaml", "note", "undeclared-schema")]
    assert findings[0].location.line == place(invoice_file.read_text(), "name: invoice")[0]
    assert "getInvoice lookup invoice: fields are read (invoice.organization)" in (
        findings[0].message)


# YAML and document schema ----------------------------------------------------------------------


def test_yaml_syntax_error_names_line_and_column(project: Any) -> None:
    text = CONTRACT.replace("      reason: {type: string}\n", "      reason: {type: string\n")
    project.write("contract.yaml", text)
    findings = project.run("contract.yaml")
    assert len(findings) == 1
    finding = findings[0]
    assert (finding.severity, finding.code) == ("error", "yaml")
    # The flow mapping left open on the ``reason`` line is noticed at the next key's colon.
    line, column = place(text, "lookups:")
    assert (finding.location.line, finding.location.column) == (line, column + len("lookups"))
    assert finding.message == "expected ',' or '}', but got ':'"
    assert str(finding).startswith(f"{project.root / 'contract.yaml'}:{line}:{column + 7}: ")


def test_yaml_mapping_error_points_at_the_offending_colon(project: Any) -> None:
    text = CONTRACT.replace("  effect: write\n", "  effect: write\n    oops: here: there\n")
    project.write("contract.yaml", text)
    [finding] = project.run("contract.yaml")
    assert finding.code == "yaml" and "has a ':' followed by a space inside a value" in \
        finding.message
    assert (finding.location.line, finding.location.column) == place(text, ": here")


def test_unknown_kind_points_at_the_kind_value(project: Any) -> None:
    text = CONTRACT.replace("kind: ToolContract", "kind: ToolContracts")
    project.write("contract.yaml", text)
    [finding] = project.run("contract.yaml")
    assert summary([finding]) == [("contract.yaml", 2, 7, "error", "schema")]
    assert "'ToolContracts' is not one of ToolContract, AccessPolicy, RoutingTable" in (
        finding.message)


def test_unknown_field_in_spec_points_at_the_key(project: Any) -> None:
    text = CONTRACT.replace("  effect: write\n", "  effect: write\n  retries: 3\n")
    project.write("contract.yaml", text)
    [finding] = project.run("contract.yaml")
    assert summary([finding]) == [("contract.yaml", *place(text, "retries"), "error", "schema")]
    assert finding.message.startswith("spec.retries: unknown field 'retries'; allowed here: ")


def test_wrong_error_class_points_at_the_value(project: Any) -> None:
    text = CONTRACT.replace("error_class: conflict", "error_class: state_conflict")
    project.write("contract.yaml", text)
    [finding] = project.run("contract.yaml")
    assert summary([finding]) == [
        ("contract.yaml", *place(text, "state_conflict"), "error", "schema")]
    assert "spec.rules[0].error_class: 'state_conflict' is not allowed; use one of: " in (
        finding.message)
    assert "conflict" in finding.message.split("use one of: ")[1]


def test_several_schema_errors_are_reported_in_one_run(project: Any) -> None:
    text = (CONTRACT.replace("effect: write", "effect: delete")
            .replace("error_class: conflict", "error_class: nope"))
    project.write("contract.yaml", text)
    assert summary(project.run("contract.yaml")) == [
        ("contract.yaml", *place(text, "delete"), "error", "schema"),
        ("contract.yaml", *place(text, "nope"), "error", "schema"),
    ]


# CEL --------------------------------------------------------------------------------------------


def test_cel_syntax_error_points_at_the_expression(project: Any) -> None:
    bad = '    - expression: ticket.status != "closed" )\n'
    text = CONTRACT.replace(RULE, bad)
    project.write("contract.yaml", text)
    [finding] = project.run("contract.yaml")
    line, column = place(text, '"closed" )')
    assert summary([finding]) == [
        ("contract.yaml", line, column + len('"closed" '), "error", "cel-syntax")]
    assert finding.message.startswith("spec.rules[0].expression: CEL syntax error")


def test_cel_syntax_error_in_a_block_expression_points_inside_it(project: Any) -> None:
    block = ('    - expression: >-\n'
             '        ticket.status != "closed"\n'
             '        && (has(ticket.closed_at)\n')
    text = CONTRACT.replace(RULE, block)
    project.write("contract.yaml", text)
    [finding] = project.run("contract.yaml")
    first, _ = place(text, 'ticket.status != "closed"')
    last, _ = place(text, "&& (has(ticket.closed_at)")
    assert finding.code == "cel-syntax"
    assert first <= finding.location.line <= last
    line_text = text.splitlines()[finding.location.line - 1]
    assert finding.location.column <= len(line_text)


def test_unknown_variable_is_an_error(project: Any) -> None:
    text = CONTRACT.replace(RULE, "    - expression: ticket.status != closed_status\n")
    project.write("contract.yaml", text)
    [finding] = project.run("contract.yaml")
    assert summary([finding]) == [
        ("contract.yaml", place(text, "closed_status")[0], 19, "error", "unknown-variable")]
    assert "'closed_status' is not defined here; known: actor, args, history, intent, now, " in finding.message
    assert finding.message.endswith(", ticket, tool")


def test_variable_of_a_later_lookup_is_unknown_in_an_earlier_key(project: Any) -> None:
    text = CONTRACT.replace("      key: args.ticketId\n", "      key: ticket.id\n")
    project.write("contract.yaml", text)
    findings = project.run("contract.yaml")
    assert [(f.code, f.location.line) for f in findings] == [
        ("unknown-variable", place(text, "key: ticket.id")[0])]
    assert "'ticket' is not defined here" in findings[0].message


def test_unknown_variable_points_at_the_expression_line(project: Any) -> None:
    text = CONTRACT.replace(
        RULE, '    - name: not-closed\n      expression: ticket.status != closed_status\n'
    ).replace("      name: not-closed\n", "", 1)
    text = text.replace("  examples:\n", "  verify:\n    expression: result.ok == outcome\n"
                        "  examples:\n")
    project.write("contract.yaml", text)
    findings = project.run("contract.yaml")
    assert [(f.code, f.location.line) for f in findings] == [
        ("unknown-variable", place(text, "closed_status")[0]),
        ("unknown-variable", place(text, "== outcome")[0]),
    ]


def test_unknown_args_field_is_an_error_at_the_field(project: Any) -> None:
    text = CONTRACT.replace(RULE, "    - expression: args.ticket_id != \"\"\n")
    project.write("contract.yaml", text)
    [finding] = project.run("contract.yaml")
    assert summary([finding]) == [
        ("contract.yaml", *place(text, "ticket_id"), "error", "unknown-field")]
    assert "args.ticket_id is not declared (did you mean ticketId?); declared fields: " \
           "reason, ticketId" in finding.message


def test_unknown_record_field_with_a_closed_lookup_schema_is_an_error(project: Any) -> None:
    text = CONTRACT.replace(RULE, '    - expression: ticket.state != "closed"\n')
    project.write("contract.yaml", text)
    [finding] = project.run("contract.yaml")
    assert summary([finding]) == [
        ("contract.yaml", *place(text, "state !="), "error", "unknown-field")]
    assert finding.message == (
        "closeTicket rules.not-closed: ticket.state is not declared (did you mean status?); "
        "declared fields: closed_at, id, status, tenant")


def test_unknown_record_field_with_an_open_lookup_schema_is_an_error_too(project: Any) -> None:
    """Strict: a declared schema that does not list the field, closed or not."""
    text = (CONTRACT.replace("        additionalProperties: false\n", "")
            .replace(RULE, '    - expression: ticket.state != "closed"\n'))
    project.write("contract.yaml", text)
    [finding] = project.run("contract.yaml")
    assert summary([finding]) == [
        ("contract.yaml", *place(text, "state !="), "error", "unknown-field")]
    assert "the schema does not set additionalProperties: false" in finding.message


def test_unknown_actor_field_in_an_access_rule_is_an_error(project: Any) -> None:
    """The actor schema is open (no additionalProperties: false), but it declares its
    fields: a field it does not list is a typo until declared."""
    project.write("contract.yaml", CONTRACT)
    policy = POLICY.replace('      when: "true"', "      when: actor.team == \"ops\"")
    findings = project.run("contract.yaml", policy=policy)
    assert summary(findings) == [
        ("policy.yaml", *place(policy, "team =="), "error", "unknown-field")]
    assert findings[0].message.startswith(
        "access rule anyone: actor.team is not declared (did you mean tenant?); declared "
        "fields: id, nickname, tenant; the schema does not set additionalProperties: false")


def test_optional_field_without_has_is_a_warning(project: Any) -> None:
    text = CONTRACT.replace(RULE, '    - expression: ticket.closed_at == ""\n')
    project.write("contract.yaml", text)
    [finding] = project.run("contract.yaml")
    assert summary([finding]) == [("contract.yaml", *place(text, "closed_at =="),
                                   "warning", "unguarded-optional-field")]
    assert "Write has(ticket.closed_at) && ..." in finding.message


def test_optional_field_guarded_by_has_is_clean(project: Any) -> None:
    text = CONTRACT.replace(
        RULE, '    - expression: \'!has(ticket.closed_at) || ticket.closed_at == ""\'\n')
    project.write("contract.yaml", text)
    assert project.run("contract.yaml") == []


def test_optional_args_field_without_has_is_a_warning(project: Any) -> None:
    text = CONTRACT.replace(RULE, '    - expression: args.reason != ""\n')
    project.write("contract.yaml", text)
    [finding] = project.run("contract.yaml")
    assert (finding.code, finding.severity, finding.location.line) == (
        "unguarded-optional-field", "warning", place(text, "args.reason")[0])


# Routes, duplicates, examples, disclosure ------------------------------------------------------


def test_missing_route_is_a_warning_at_the_routes(project: Any) -> None:
    project.write("contract.yaml", CONTRACT)
    routing = ROUTING.replace("    budget_exhausted: review\n", "")
    findings = project.run("contract.yaml", routing=routing)
    assert summary(findings) == [
        ("routing.yaml", *place(routing, "malformed: regenerate"), "warning", "missing-route")]
    assert "error class budget_exhausted has no route" in findings[0].message


def test_duplicate_tool_name_across_files_reports_the_second(project: Any) -> None:
    project.write("a_first.yaml", CONTRACT)
    second = "# the same tool again\n" + CONTRACT.replace('version: "1.0.0"', 'version: "2.0.0"')
    project.write("b_second.yaml", second)
    findings = project.run("a_first.yaml", "b_second.yaml")
    assert summary(findings) == [
        ("b_second.yaml", *place(second, "closeTicket"), "error", "duplicate-tool")]
    assert f"already defined at {project.root / 'a_first.yaml'}:1:1" in findings[0].message


def test_example_failing_its_own_schema_is_an_error(project: Any) -> None:
    text = CONTRACT.replace("{ticketId: T-1, reason: done}", "{ticketId: TICKET-1, reason: done}")
    project.write("contract.yaml", text)
    [finding] = project.run("contract.yaml")
    assert summary([finding]) == [
        ("contract.yaml", *place(text, "TICKET-1"), "error", "example-invalid")]
    assert "closeTicket example 1: arguments.ticketId: 'TICKET-1' does not match" in (
        finding.message)


def test_example_with_an_undeclared_argument_is_an_error(project: Any) -> None:
    text = CONTRACT.replace("{ticketId: T-1, reason: done}", "{ticketId: T-1, urgent: true}")
    project.write("contract.yaml", text)
    [finding] = project.run("contract.yaml")
    assert (finding.code, finding.location.line) == ("example-invalid", place(text, "urgent")[0])
    assert "argument 'urgent' is not declared" in finding.message


def test_forbidden_message_using_a_record_field_is_a_leak(project: Any) -> None:
    rule = ('    - message: Ticket {args.ticketId} belongs to {ticket.tenant}.\n'
            '      expression: ticket.tenant == actor.tenant\n'
            '      name: own-tenant\n'
            '      error_class: forbidden\n')
    text = CONTRACT.replace("  examples:\n", rule + "  examples:\n")
    project.write("contract.yaml", text)
    [finding] = project.run("contract.yaml")
    assert summary([finding]) == [
        ("contract.yaml", place(text, "{ticket.tenant}")[0], 7, "error", "forbidden-leak")]
    assert "uses {ticket.tenant}, a field of a looked-up record" in finding.message


def test_forbidden_message_using_only_args_is_not_a_leak(project: Any) -> None:
    rule = ('    - message: You cannot close {args.ticketId}.\n'
            '      expression: ticket.tenant == actor.tenant\n'
            '      name: own-tenant\n'
            '      error_class: forbidden\n')
    project.write("contract.yaml", CONTRACT.replace("  examples:\n", rule + "  examples:\n"))
    assert project.run("contract.yaml") == []


def test_second_document_of_a_file_gets_its_own_line_numbers(project: Any) -> None:
    first = CONTRACT.replace("closeTicket", "reopenTicket")
    second = CONTRACT.replace(RULE, "    - expression: ticket.status != closed_status\n")
    text = first + "---\n" + second
    project.write("both.yaml", text)
    findings = project.run("both.yaml")
    line = place(text, "closed_status")[0]
    assert line > len(first.splitlines()) + 1
    assert summary(findings) == [("both.yaml", line, 19, "error", "unknown-variable")]
    assert findings[0].message.startswith("closeTicket rules.not-closed:")


def test_second_document_schema_error_points_into_the_second_document(project: Any) -> None:
    text = CONTRACT + "---\n" + CONTRACT.replace("closeTicket", "reopenTicket").replace(
        "error_class: conflict", "error_class: clash")
    project.write("both.yaml", text)
    assert summary(project.run("both.yaml")) == [
        ("both.yaml", *place(text, "clash"), "error", "schema")]


# The command --------------------------------------------------------------------------------------


def test_lint_json_output_parses_with_every_field(project: Any) -> None:
    text = CONTRACT.replace(RULE, '    - expression: ticket.closed_at == closed_status\n')
    project.write("contract.yaml", text)
    project.run("contract.yaml")  # writes the policy and routing table beside it
    result = CliRunner().invoke(main, ["lint", "--format", "json", str(project.root)])
    assert result.exit_code == 1, result.output
    findings = json.loads(result.stdout)
    line = place(text, "closed_status")[0]
    assert [(f["code"], f["severity"], f["line"], f["column"]) for f in findings] == [
        ("unknown-variable", "error", line, 19),  # the expression
        ("unguarded-optional-field", "warning", *place(text, "closed_at =="))]  # the field
    for finding in findings:
        assert set(finding) == {"file", "line", "column", "severity", "code", "message"}
        assert finding["file"] == str(project.root / "contract.yaml")
        assert isinstance(finding["message"], str) and finding["message"]


def test_lint_text_output_is_one_finding_a_line(project: Any) -> None:
    text = CONTRACT.replace("error_class: conflict", "error_class: clash")
    project.write("contract.yaml", text)
    project.run("contract.yaml")
    result = CliRunner().invoke(main, ["lint", str(project.root)])
    assert result.exit_code == 1
    line, column = place(text, "clash")
    assert result.stdout.splitlines() == [
        f"{project.root / 'contract.yaml'}:{line}:{column}: error schema "
        "spec.rules[0].error_class: 'clash' is not allowed; use one of: malformed, unknown_tool, "
        "unexpected_argument, invalid_argument, not_found, ambiguous, forbidden, conflict, "
        "confirmation_required, transient, unknown_outcome, duplicate, permanent, "
        "answer_too_large, reconcile_failed, budget_exhausted"]
    assert result.stderr.strip() == "1 error(s), 0 warning(s)"
