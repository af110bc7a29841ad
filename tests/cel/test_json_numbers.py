"""JSON numbers typed by their schema (``cel.json_numbers``): an argument, actor field or
record field declared ``number`` decides the same in arithmetic whether the model wrote
``600`` or ``600.0``; one declared ``integer`` the same for ``5`` and ``5.0``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from callgate_rules.cel.expression import compile_expression
from callgate_rules.cel.json_numbers import number_typing
from callgate_rules.taxonomy import Route
from tests.conftest import NOW

SCHEMA = {"type": "object", "properties": {
    "amount": {"type": "number"}, "count": {"type": "integer"}, "note": {"type": "string"},
    "lines": {"type": "array", "items": {"type": "object", "properties": {
        "price": {"type": "number"}}}}}}


def test_numbers_take_their_declared_type_and_nothing_else_changes() -> None:
    typed = number_typing(SCHEMA)
    assert typed is not None
    value = {"amount": 600, "count": 5.0, "note": "7", "lines": [{"price": 2}, {"price": 2.5}],
             "extra": 1}
    result = typed(value)
    assert result == {"amount": 600.0, "count": 5, "note": "7",
                      "lines": [{"price": 2.0}, {"price": 2.5}], "extra": 1}
    assert type(result["amount"]) is float and type(result["count"]) is int
    assert type(result["lines"][0]["price"]) is float and type(result["extra"]) is int
    assert value["amount"] == 600 and type(value["amount"]) is int  # the input is not changed


def test_values_that_need_nothing_are_shared_and_schemas_without_numbers_cost_nothing() -> None:
    typed = number_typing(SCHEMA)
    assert typed is not None
    already = {"amount": 1.5, "count": 2, "lines": [{"price": 1.5}]}
    assert typed(already) is already
    assert number_typing({"type": "object", "properties": {"s": {"type": "string"}}}) is None
    assert number_typing({"$ref": "#/x"}) is None and number_typing(True) is None


def test_wrong_shapes_arrive_unchanged() -> None:
    typed = number_typing(SCHEMA)
    assert typed is not None
    for value in ("600", [600], None, {"amount": "600"}, {"amount": True},
                  {"lines": "x"}, {"lines": [1, None]}):
        assert typed(value) == value


def test_an_int_a_double_cannot_hold_exactly_stays_an_int() -> None:
    typed = number_typing({"type": "number"})
    assert typed is not None
    assert type(typed(2**53 + 1)) is int and typed(2**53 + 1) == 2**53 + 1


@given(st.integers(min_value=-(2**53), max_value=2**53))
def test_arithmetic_decides_the_same_for_either_spelling(number: int) -> None:
    typed = number_typing(SCHEMA)
    assert typed is not None
    rule = compile_expression("args.amount + 0.5 > 0.0 && args.count * 2 >= 0")
    as_int = rule({"args": typed({"amount": number, "count": abs(number)})})
    as_float = rule({"args": typed({"amount": float(number), "count": float(abs(number))})})
    assert as_int == as_float == (number + 0.5 > 0)


POLICY = """\
apiVersion: callgate/v1
kind: ToolContract
metadata: {name: pay, version: "1", owner: t@example.com, description: Pay an invoice.}
spec:
  effect: read
  arguments:
    type: object
    required: [invoiceId, amount]
    properties:
      invoiceId: {type: string}
      amount: {type: number}
  lookups:
    - name: invoice
      collection: invoices
      key: args.invoiceId
      schema:
        type: object
        properties: {id: {type: string}, balance: {type: number}}
  rules:
    - name: fee-within-balance
      expression: "args.amount + 2.5 <= invoice.balance"
      error_class: invalid_argument
      message: "{args.amount} and the fee exceed the balance."
  examples: [{arguments: {invoiceId: I-1, amount: 10}}]
---
apiVersion: callgate/v1
kind: AccessPolicy
metadata: {name: pay-access, version: "1", owner: t@example.com, description: anyone}
spec:
  rules:
    - {name: anyone, effect: allow, tools: [pay], when: "true"}
"""


def test_a_rule_adding_a_fee_decides_the_same_for_600_and_600_0(
        tmp_path: Path, ref: Any, compile_gate: Any) -> None:
    ref.write(tmp_path / "pay.yaml", POLICY)
    gate = compile_gate(tmp_path, world={"invoices": [{"id": "I-1", "balance": 700}]})
    for amount in (600, 600.0):
        decision = gate.check({"name": "pay", "arguments": {"invoiceId": "I-1",
                                                            "amount": amount}},
                              actor={"id": "U-1"}, now=NOW)
        assert decision.route == Route.EXECUTE, decision.agent_message
    for amount in (698, 698.0):
        decision = gate.check({"name": "pay", "arguments": json.loads(
            json.dumps({"invoiceId": "I-1", "amount": amount}))}, actor={"id": "U-1"}, now=NOW)
        assert decision.route != Route.EXECUTE
        assert decision.agent_message.startswith("698 and the fee exceed the balance.")
