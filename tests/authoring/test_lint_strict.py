"""The strict lint: undeclared fields of declared schemas are errors, one broken file is
reported once (no cascade into healthy files), YAML traps are flagged, has() credits
exactly the field it guards, and notes suggest schemas where there are none.

Each test writes a small project to ``tmp_path``; places are found by searching the
written text for a marker.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from callgate_rules.authoring.lint import lint
from callgate_rules.cli import main

POLICY = """\
apiVersion: callgate/v1
kind: AccessPolicy
metadata: {name: strict-access, version: "1", owner: t@example.com, description: who}
spec:
  actor:
    type: object
    required: [id, tenant]
    properties:
      id: {type: string}
      tenant: {type: string}
      role: {type: string}
  session:
    type: object
    properties:
      authenticated: {type: boolean}
  rules:
    - name: tenant-notes
      effect: allow
      tools: [addNote]
      when: note_ticket.tenant == actor.tenant
"""

ROUTING = """\
apiVersion: callgate/v1
kind: RoutingTable
metadata: {name: strict-routing, version: "1", owner: t@example.com, description: routes}
spec:
  routes: {malformed: regenerate, unknown_tool: refuse, unexpected_argument: refuse,
    invalid_argument: regenerate, not_found: replan, ambiguous: clarify, forbidden: refuse,
    conflict: refuse, confirmation_required: await_confirmation, transient: retry,
    unknown_outcome: reconcile, duplicate: return_receipt, permanent: refuse,
    answer_too_large: replan, reconcile_failed: review, budget_exhausted: review}
"""

CONTRACT = """\
apiVersion: callgate/v1
kind: ToolContract
metadata:
  name: addNote
  version: "1.0.0"
  owner: t@example.com
  description: add a note to a ticket
spec:
  effect: write
  idempotency: key
  arguments:
    type: object
    required: [ticketId, text]
    properties:
      ticketId: {type: string}
      text: {type: string, description: the note as written}
      meta:
        type: object
        properties:
          tag: {type: string}
          source: {type: string}
  lookups:
    - name: note_ticket
      collection: tickets
      key: args.ticketId
      schema:
        type: object
        required: [id, tenant]
        properties:
          id: {type: string}
          tenant: {type: string}
          closed_at: {type: string}
  rules:
    - name: the-rule
      expression: EXPRESSION
      error_class: invalid_argument
      message: no.
  examples:
    - arguments: {ticketId: T-1, text: hello}
"""

# A second, healthy contract that the broken-file tests keep beside the broken one; the
# policy allows it too.
OTHER = CONTRACT.replace("addNote", "readNote").replace("effect: write", "effect: read")
BOTH = POLICY.replace("tools: [addNote]", "tools: [addNote, readNote]")


def place(text: str, marker: str) -> tuple[int, int]:
    """(line, column), 1-based, of the first ``marker`` in ``text``."""
    for number, line in enumerate(text.splitlines(), start=1):
        column = line.find(marker)
        if column >= 0:
            return number, column + 1
    raise AssertionError(f"{marker!r} not in the text")


@pytest.fixture
def project(tmp_path: Path) -> Any:
    class Project:
        root = tmp_path

        @staticmethod
        def write(name: str, text: str) -> str:
            (tmp_path / name).write_text(text, encoding="utf-8")
            return text

        @staticmethod
        def run(expression: str = "args.text != ''", *, policy: str = POLICY,
                routing: str | None = ROUTING, notes: bool = False,
                contract: str = CONTRACT) -> list[tuple[Any, ...]]:
            Project.write("contract.yaml", contract.replace("EXPRESSION", expression))
            Project.write("policy.yaml", policy)
            if routing is not None:
                Project.write("routing.yaml", routing)
            return [(Path(f.location.path).name, f.location.line, f.location.column,
                     f.severity, f.code, f.message)
                    for f in lint([tmp_path], notes=notes)]

    return Project


def test_the_fixture_lints_clean(project: Any) -> None:
    assert project.run() == []


# Undeclared fields of declared schemas -----------------------------------------------------------

def test_an_undeclared_actor_field_is_an_error_though_the_schema_is_open(project: Any) -> None:
    policy = POLICY.replace("note_ticket.tenant == actor.tenant",
                            "note_ticket.tenant == actor.tenant && actor.rol == 'agent'")
    findings = project.run(policy=policy)
    assert findings == [(
        "policy.yaml", *place(policy, "rol =="), "error", "unknown-field",
        "access rule tenant-notes: actor.rol is not declared (did you mean role?); declared "
        "fields: id, role, tenant; the schema does not set additionalProperties: false, but a "
        "field it does not declare is almost surely a typo: declare it under properties if "
        "it is meant")]


def test_lint_exits_1_on_an_undeclared_session_field(project: Any) -> None:
    policy = POLICY.replace("note_ticket.tenant == actor.tenant",
                            "has(session.authenticatd) && session.authenticatd")
    project.run(policy=policy)
    result = CliRunner().invoke(main, ["lint", str(project.root)])
    assert result.exit_code == 1
    line, column = place(policy, "authenticatd)")
    assert f"policy.yaml:{line}:{column}: error unknown-field access rule tenant-notes: " \
           "session.authenticatd is not declared (did you mean authenticated?)" in result.stdout


def test_an_undeclared_record_field_is_an_error(project: Any) -> None:
    findings = project.run("note_ticket.closedAt == ''")
    [(_, line, column, severity, code, message)] = findings
    assert (line, column, severity, code) == (
        *place(CONTRACT.replace("EXPRESSION", "note_ticket.closedAt == ''"), "closedAt"),
        "error", "unknown-field")
    assert "(did you mean closed_at?); declared fields: closed_at, id, tenant" in message


def test_a_closed_schema_needs_no_word_on_openness(project: Any) -> None:
    closed = CONTRACT.replace("        required: [id, tenant]\n",
                              "        required: [id, tenant]\n"
                              "        additionalProperties: false\n")
    [finding] = project.run("note_ticket.closedAt == ''", contract=closed)
    assert finding[5].endswith("declared fields: closed_at, id, tenant")


# Notes ---------------------------------------------------------------------------------------------

def test_no_actor_schema_is_a_note_only_when_asked(project: Any) -> None:
    policy = POLICY.split("  actor:\n")[0] + "  rules:" + POLICY.split("  rules:")[1]
    policy = policy.replace("note_ticket.tenant == actor.tenant",
                            "note_ticket.tenant != '' && actor.role == 'agent'")
    assert project.run(policy=policy) == []
    [note] = project.run(policy=policy, notes=True)
    assert note[:5] == ("policy.yaml", *place(policy, "role =="), "note", "undeclared-schema")
    assert note[5].startswith("actor: fields are read (actor.role) but no schema declares them; "
                              "declare spec.actor of an AccessPolicy")
    result = CliRunner().invoke(main, ["lint", "--notes", str(project.root)])
    assert result.exit_code == 0
    assert result.stderr.strip() == "0 error(s), 0 warning(s), 1 note(s)"


def test_a_lookup_without_schema_gets_a_note_at_its_name(project: Any) -> None:
    contract = CONTRACT.replace(CONTRACT[CONTRACT.index("      schema:"):
                                         CONTRACT.index("  rules:")], "")
    [note] = project.run(contract=contract, notes=True)
    assert note[:5] == ("contract.yaml", *place(contract, "note_ticket"), "note",
                        "undeclared-schema")
    assert "addNote lookup note_ticket: fields are read (note_ticket.tenant)" in note[5]


# One broken file, one finding ----------------------------------------------------------------------

def test_a_contract_that_is_not_yaml_adds_nothing_in_healthy_files(project: Any) -> None:
    """The policy names addNote and reads its look-up: neither is reported, only the YAML."""
    broken = CONTRACT.replace("EXPRESSION", "args.text != ''").replace(
        "  effect: write", "  effect: write\n   bad: [indent")
    project.write("other.yaml", OTHER.replace("EXPRESSION", "args.text != ''"))
    findings = project.run(contract=broken, policy=BOTH)
    assert [(row[0], row[1], row[3], row[4]) for row in findings] == [
        ("contract.yaml", place(broken, "bad:")[0], "error", "yaml")]


def test_a_contract_with_a_schema_error_adds_nothing_in_healthy_files(project: Any) -> None:
    broken = CONTRACT.replace("effect: write", "effect: wrte")
    project.write("other.yaml", OTHER.replace("EXPRESSION", "args.text != ''"))
    findings = project.run(contract=broken, policy=BOTH)
    assert [row[:5] for row in findings] == [
        ("contract.yaml", *place(broken, "wrte"), "error", "schema")]


def test_without_a_broken_file_an_unknown_tool_is_still_reported(project: Any) -> None:
    policy = POLICY.replace("tools: [addNote]", "tools: [addNote, addNotes]")
    findings = project.run(policy=policy)
    assert [row[3:5] for row in findings] == [("warning", "unknown-tool")]


def test_a_broken_access_policy_leaves_no_no_allow_rule_behind(project: Any) -> None:
    broken = POLICY.replace("effect: allow", "effect: alow")
    findings = project.run(policy=broken)
    assert [row[:5] for row in findings] == [
        ("policy.yaml", *place(broken, "alow"), "error", "schema")]


def test_an_access_rule_that_does_not_compile_hides_only_its_own_tools(project: Any) -> None:
    broken = POLICY.replace("note_ticket.tenant == actor.tenant",
                            "note_ticket.tenant == == actor.tenant")
    project.write("other.yaml", OTHER.replace("EXPRESSION", "args.text != ''"))
    findings = project.run(policy=broken)
    assert [(row[0], row[3], row[4]) for row in findings] == [
        ("other.yaml", "warning", "no-allow-rule"),  # readNote: no rule ever named it
        ("policy.yaml", "error", "cel-syntax")]


def test_a_routing_table_that_is_not_yaml_is_no_missing_routing_table(project: Any) -> None:
    project.write("routing.yaml", ROUTING.replace("routes: {", "routes: {{"))
    findings = project.run(routing=None)
    assert [(row[0], row[4]) for row in findings] == [("routing.yaml", "yaml")]


def test_a_lookup_that_does_not_compile_is_no_unknown_variable(project: Any) -> None:
    broken = CONTRACT.replace("key: args.ticketId", "key: args.ticketId +")
    findings = project.run("note_ticket.id != ''", contract=broken)
    assert [(row[0], row[4]) for row in findings] == [("contract.yaml", "cel-syntax")]


# YAML traps ----------------------------------------------------------------------------------------

def test_a_comma_in_a_flow_mapping_makes_a_key_and_is_flagged(project: Any) -> None:
    contract = CONTRACT.replace("description: the note as written}",
                                "description: the note, as written}")
    findings = project.run(contract=contract)
    assert findings == [(
        "contract.yaml", *place(contract, "as written}"), "error", "yaml-bare-key",
        "spec.arguments.properties.text: 'as written' is a key with no value: in a flow "
        "mapping ({...}) a comma ends the entry, so the text after it became a key of its "
        "own. Quote the text that holds the comma (description: \"a, b\"), or add the missing "
        "\"key: value\"")]


def test_a_property_with_a_null_schema_is_flagged_at_its_key_once(project: Any) -> None:
    contract = CONTRACT.replace("          source: {type: string}\n", "          source:\n")
    findings = project.run(contract=contract)
    assert findings == [(
        "contract.yaml", *place(contract, "source:"), "error", "null-property",
        "spec.arguments.properties.meta.properties.source has no schema: nothing follows the "
        "colon, so YAML reads it as null. Give it one, e.g. source: {type: string} (or {} for "
        "any value)")]


def test_a_null_value_outside_properties_written_with_a_colon_is_no_trap(project: Any) -> None:
    contract = CONTRACT.replace("  examples:\n", "  mask:\n  examples:\n")
    assert not any(row[4] in ("yaml-bare-key", "null-property")
                   for row in project.run(contract=contract))


# has() guards exactly the field it names -----------------------------------------------------------

@pytest.mark.parametrize(("expression", "unguarded"), [
    ("has(args.meta) && args.meta.tag != ''", "args.meta.tag"),
    ("has(args.meta.tag) && args.meta.tag != ''", "args.meta"),
    ("has(args.meta) && has(args.meta.tag) && args.meta.source != ''", "args.meta.source"),
    ("has(args.meta) && has(args.meta.source) && args.meta.tag != ''", "args.meta.tag"),
    ("has(args.meta) && (has(args.meta.tag) || args.meta.tag != '')", "args.meta.tag"),
])
def test_has_credits_exactly_the_field_it_guards(project: Any, expression: str,
                                                  unguarded: str) -> None:
    findings = project.run(expression)
    assert [(row[4], row[5].split(": ", 1)[1].split(" is optional")[0]) for row in findings] \
        == [("unguarded-optional-field", unguarded)]


@pytest.mark.parametrize("expression", [
    "has(args.meta) && has(args.meta.tag) && args.meta.tag != ''",
    "has(args.meta) && has(args.meta.source) && args.meta.source != ''",
    "\"!has(note_ticket.closed_at) || note_ticket.closed_at == ''\"",
    "args.meta.tag != '' && has(args.meta.tag) && has(args.meta)",  # && absorbs the error
    "\"has(args.meta) ? (has(args.meta.tag) ? args.meta.tag : '') == '' : true\"",
])
def test_each_guarded_optional_field_is_clean(project: Any, expression: str) -> None:
    assert project.run(expression) == []


def test_a_broken_definitions_document_is_reported_once(project: Any) -> None:
    """The rule calling a definition of the broken document gets no finding of its own."""
    definitions = """\
apiVersion: callgate/v1
kind: Definitions
metadata: {name: tables, version: "1", owner: t@example.com, description: tables}
spec:
  definitions:
    long_enough(text): size(text) >= 3
  extra: 1
"""
    project.write("tables.yaml", definitions)
    findings = project.run("long_enough(args.text)")
    assert [(row[0], row[4]) for row in findings] == [("tables.yaml", "schema")]
