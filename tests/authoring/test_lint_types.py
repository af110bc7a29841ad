"""``callgate lint`` type-checks every expression: findings at file:line:col, inside the
expression (a block scalar's second line included), with the nearest correct name.

Each test writes a clean policy and routing table beside one contract with one defect;
places are found by searching the written text for a marker.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from callgate_rules.authoring.lint import lint
from callgate_rules.documents.compiler import Finding

POLICY = """\
apiVersion: callgate/v1
kind: AccessPolicy
metadata: {name: types-access, version: "1", owner: t@example.com, description: everyone}
spec:
  actor:
    type: object
    required: [id, tenant, role]
    properties:
      id: {type: string}
      tenant: {type: string}
      role: {type: string, enum: [agent, viewer]}
  session:
    type: object
    properties:
      authenticated: {type: boolean}
  rules:
    - name: anyone
      effect: allow
      tools: ["*"]
      when: WHEN
"""

ROUTING = """\
apiVersion: callgate/v1
kind: RoutingTable
metadata: {name: types-routing, version: "1", owner: t@example.com, description: routes}
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
  name: refund
  version: "1.0.0"
  owner: t@example.com
  description: refund an order
spec:
  effect: write
  idempotency: key
  arguments:
    type: object
    required: [orderId, amount, name, quantity, currency]
    properties:
      orderId: {type: string}
      name: {type: string}
      quantity: {type: integer}
      amount: {type: number}
      currency: {type: string, enum: [EUR, USD]}
      note: {type: string}
  lookups:
    - name: order
      collection: orders
      key: args.orderId
      visible: record.tenant == actor.tenant
      schema:
        type: object
        required: [id, tenant, total, lines]
        properties:
          id: {type: string}
          tenant: {type: string}
          total: {type: number}
          lines:
            type: array
            items:
              type: object
              required: [sku, qty]
              properties:
                sku: {type: string}
                qty: {type: integer}
  rules:
    - name: the-rule
      expression: EXPRESSION
      error_class: invalid_argument
      message: no.
  verify:
    expression: result.id == args.orderId
  examples:
    - arguments: {orderId: O-1, amount: 5.5, name: Ann Lee, quantity: 1, currency: EUR}
"""


def place(text: str, marker: str) -> tuple[int, int]:
    """(line, column), 1-based, of the first ``marker`` in ``text``."""
    for number, line in enumerate(text.splitlines(), start=1):
        column = line.find(marker)
        if column >= 0:
            return number, column + 1
    raise AssertionError(f"{marker!r} not in the text")


@pytest.fixture
def run(tmp_path: Path) -> Any:
    """Lint the contract with EXPRESSION (and the policy with WHEN) replaced; the findings
    as (file, line, column, severity, code, message) and the written texts."""

    def run(expression: str, when: str = '"true"') -> tuple[list[tuple[Any, ...]], str, str]:
        contract = CONTRACT.replace("EXPRESSION", expression)
        policy = POLICY.replace("WHEN", when)
        (tmp_path / "refund.yaml").write_text(contract, encoding="utf-8")
        (tmp_path / "policy.yaml").write_text(policy, encoding="utf-8")
        (tmp_path / "routing.yaml").write_text(ROUTING, encoding="utf-8")
        return [_row(f) for f in lint([tmp_path])], contract, policy

    return run


def _row(finding: Finding) -> tuple[Any, ...]:
    return (Path(finding.location.path).name, finding.location.line, finding.location.column,
            finding.severity, finding.code, finding.message)


def test_the_fixture_lints_clean(run: Any) -> None:
    findings, _, _ = run("args.amount <= order.total")
    assert findings == []


def test_split_on_an_integer_is_an_error_with_the_receiver_type(run: Any) -> None:
    findings, text, _ = run("""args.quantity.split(" ").size() > 1""")
    assert findings == [(
        "refund.yaml", *place(text, "split("), "error", "no-overload",
        'refund rules.the-rule: split is a string method: args.quantity.split(" ") needs '
        "args.quantity to be a string; it is an integer here")]


def test_split_on_a_string_is_fine(run: Any) -> None:
    findings, _, _ = run("""args.name.split(" ").size() > 1""")
    assert findings == []


def test_an_unknown_function_names_the_nearest_one(run: Any) -> None:
    findings, text, _ = run("args.name.lowerAcii() == 'ann'")
    [(file, line, column, severity, code, message)] = findings
    assert (file, line, column, severity, code) == (
        "refund.yaml", *place(text, "lowerAcii"), "error", "unknown-function")
    assert "did you mean lowerAscii?" in message


def test_a_namespaced_function_is_no_variable(run: Any) -> None:
    assert run("math.greatest(args.quantity, 1) > 2 && strings.quote(args.name) != ''")[0] \
        == []


def test_an_unknown_namespaced_function_names_the_nearest_one(run: Any) -> None:
    findings, text, _ = run("math.greatst(args.quantity, 1) > 2")
    [(file, line, column, severity, code, message)] = findings
    assert (line, column, code) == (*place(text, "greatst"), "unknown-function")
    assert "did you mean math.greatest?" in message


def test_wrong_arity(run: Any) -> None:
    findings, text, _ = run("args.name.startsWith('a', 'b')")
    [(_, line, column, severity, code, _)] = findings
    assert (line, column, severity, code) == (*place(text, "startsWith"), "error",
                                              "wrong-arity")


def test_int_and_double_arithmetic_is_an_error_and_comparison_is_not(run: Any) -> None:
    findings, text, _ = run("args.amount + 1 <= order.total")
    [(_, line, column, _, code, message)] = findings
    assert (line, column, code) == (*place(text, "+ 1"), "no-overload")
    assert "no overload of + takes (double, int)" in message and "write 1.0" in message
    assert run("args.quantity <= order.total")[0] == []


def test_a_comparison_that_can_never_be_true_is_a_warning(run: Any) -> None:
    findings, text, _ = run("args.name == 3")
    assert findings == [(
        "refund.yaml", *place(text, "== 3"), "warning", "impossible-comparison",
        "refund rules.the-rule: args.name == 3 can never be true: args.name is a string and 3 "
        "is an integer")]


def test_a_value_outside_the_enum_is_a_warning(run: Any) -> None:
    findings, text, _ = run("args.currency != 'GBP'")
    [(_, line, column, severity, code, message)] = findings
    assert (line, column, severity, code) == (*place(text, "!= 'GBP'"), "warning",
                                              "impossible-comparison")
    assert 'is always true: "GBP" is not one of the values its schema allows ("EUR", ' \
           '"USD")' in message


def test_null_against_a_required_field_is_a_warning(run: Any) -> None:
    findings, _, _ = run("order.total != null")
    [(_, _, _, severity, code, message)] = findings
    assert (severity, code) == ("warning", "impossible-comparison")
    assert "the field is required and its schema does not allow null" in message


def test_an_unknown_field_deep_in_a_record_names_the_declared_ones(run: Any) -> None:
    findings, text, _ = run("order.lines.all(l, l.quantity > 0)")
    assert findings == [(
        "refund.yaml", *place(text, "quantity > 0"), "error", "unknown-field",
        "refund rules.the-rule: l.quantity is not declared; declared fields: qty, sku; the "
        "schema does not set additionalProperties: false, but a field it does not declare is "
        "almost surely a typo: declare it under properties if it is meant")]


def test_macros_bind_element_types(run: Any) -> None:
    findings, text, _ = run("order.lines.exists(l, l.sku == 1)")
    [(_, line, column, _, code, _)] = findings
    assert (line, column, code) == (*place(text, "== 1"), "impossible-comparison")
    assert run("order.lines.map(l, l.qty).all(q, q > 0)")[0] == []


def test_a_finding_inside_a_folded_expression_points_at_its_own_line(run: Any) -> None:
    findings, text, _ = run(">-\n        args.amount <= order.total\n"
                            "        && args.name.split(1).size() > 0")
    [(_, line, column, _, code, _)] = findings
    assert (line, column, code) == (*place(text, "split(1)"), "no-overload")


def test_a_rule_that_is_not_a_bool_is_an_error(run: Any) -> None:
    findings, text, _ = run("args.name")
    [(_, line, column, severity, code, _)] = findings
    line_of_rule, column_of_key = place(text, "expression: args.name")
    assert (line, column, severity, code) == (line_of_rule, column_of_key + 12, "error",
                                              "not-a-condition")


def test_provenance_of_an_argument_is_a_list_of_sources(run: Any) -> None:
    assert run('size(provenance.amount) > 0 && "user" in provenance.name')[0] == []
    findings, text, _ = run("provenance.name == 'user'")
    [(_, line, column, _, code, _)] = findings
    assert (line, column, code) == (*place(text, "== 'user'"), "impossible-comparison")


def test_an_access_rule_is_checked_against_the_actor_and_session_schemas(run: Any) -> None:
    findings, _, policy = run("args.quantity > 0",
                              when="actor.role == 'admin' && session.authenticated")
    assert [row[:5] for row in findings] == [
        ("policy.yaml", *place(policy, "== 'admin'"), "warning", "impossible-comparison"),
        ("policy.yaml", place(policy, "session.authenticated")[0],
         place(policy, "session.authenticated")[1] + len("session."), "warning",
         "unguarded-optional-field")]
    assert findings[0][5].startswith("access rule anyone: actor.role == \"admin\" can never be "
                                     "true")


def test_a_variable_without_a_schema_is_never_a_type_error(run: Any) -> None:
    """``result`` comes from the destination: nothing is known of its shape."""
    findings, _, _ = run("has(order.id)")
    assert findings == []


# The README's example ----------------------------------------------------------------------------

# docs/how-to/command-line.md shows what lint prints (its block marked <!-- lint-example -->)
README = Path(__file__).resolve().parents[2] / "docs" / "how-to" / "command-line.md"
MISTAKES = (('ticket.status != "closed"', 'ticket.status != "clsed"'),
            ("ticket.team in assignee.teams", "ticket.team in assignee.team"),
            ("timestamp(args.dueAt) > now", "args.dueAt > now"))


def test_the_readme_lint_example_is_what_lint_prints(
        ref: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from callgate_rules.cli import main

    contracts, _ = ref.copy(tmp_path)
    path = contracts / "createFollowUp.yaml"
    text = path.read_text(encoding="utf-8")
    for written, mistake in MISTAKES:
        assert written in text
        text = text.replace(written, mistake)
    path.write_text(text, encoding="utf-8")
    block = README.read_text(encoding="utf-8").split("<!-- lint-example -->\n```\n", 1)[1]
    command, *expected = block.split("\n```", 1)[0].splitlines()
    assert command == "$ callgate lint"
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["lint"])
    assert result.exit_code == 1
    assert result.stdout.splitlines() == expected


# Named definitions ---------------------------------------------------------------------------

DEFINITIONS = """\
apiVersion: callgate/v1
kind: Definitions
metadata: {name: refund-tables, version: "1.0.0", owner: t@example.com, description: tables}
spec:
  definitions:
    limit_by_currency: {EUR: 500, USD: 550}
    within_limit(amount, currency): amount <= limit_by_currency[currency]
    words(text): text.split(" ")
"""


def test_an_expression_is_checked_with_its_definitions_expanded(run: Any, tmp_path: Path) -> None:
    (tmp_path / "tables.yaml").write_text(DEFINITIONS, encoding="utf-8")
    assert run("within_limit(args.amount, args.currency) && size(words(args.name)) > 1")[0] \
        == []
    findings, text, _ = run(
        "within_limit(args.amount, args.currency) && size(words(args.quantity)) > 1")
    [(file, line, column, severity, code, message)] = findings
    # the definition's body takes the place of the call: the finding is where it is used
    assert (file, line, severity, code) == ("refund.yaml", place(text, "words(")[0], "error",
                                            "no-overload")
    assert "split is a string method" in message and "args.quantity" in message


def test_verify_reads_result_as_the_contracts_result_schema_declares(
        run: Any, tmp_path: Path) -> None:
    findings, text, _ = run("args.quantity > 0")
    assert findings == []  # without spec.result, result is unknown: nothing to check
    contract = CONTRACT.replace("EXPRESSION", "args.quantity > 0").replace(
        "  verify:\n", "  result:\n    type: object\n    required: [id]\n"
        "    properties: {id: {type: string}, refunded: {type: number}}\n  verify:\n").replace(
        "result.id == args.orderId", "result.ident == args.orderId")
    (tmp_path / "refund.yaml").write_text(contract, encoding="utf-8")
    [finding] = lint([tmp_path])
    assert (finding.location.line, finding.location.column, finding.code) == (
        *place(contract, "ident =="), "unknown-field")
    assert "refund verify: result.ident is not declared; declared fields: id, refunded" in (
        finding.message)
