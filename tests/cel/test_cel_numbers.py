"""CEL's numeric semantics (the current spec): ``int``, ``uint`` and ``double`` compare with
each other by value, and JSON numbers decide alike however they are written.

The property test checks the compiled path (callgate's one CEL backend; there is no
fallback interpreter) against ``spec_compare``, a plain statement of the spec's rules.
"""

from __future__ import annotations

import json
import math
import operator
from collections.abc import Callable
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from callgate_rules.cel.expression import compile_expression
from callgate_rules.taxonomy import Route

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)

OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt,
    "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}


def spec_compare(symbol: str, left: int | float, right: int | float) -> bool:
    """The spec's rule, written out: compare the exact mathematical values; NaN is unequal
    to everything (itself included) and neither less nor greater than anything."""
    if isinstance(left, float) and math.isnan(left) or isinstance(right, float) and \
            math.isnan(right):
        return symbol == "!="
    return OPERATORS[symbol](Fraction(left), Fraction(right))


def near(center: int) -> st.SearchStrategy[int]:
    return st.integers(min_value=center - 3, max_value=center + 3)


# JSON numbers: ints (small, near 2^53, near ±2^63), floats, and integral floats.
INTS = st.one_of(st.integers(-1000, 1000), near(2**53), near(-(2**53)),
                 near(2**63 - 4), near(-(2**63) + 3))
FLOATS = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False, width=64),
    INTS.map(float),
    st.sampled_from([9.223372036854776e18, -9.223372036854776e18, 2.0**53, 2.0**53 + 2]),
)
NUMBERS = st.one_of(INTS, FLOATS)


def evaluate(source: str, variables: dict[str, Any]) -> Any:
    return compile_expression(source)(variables)


@settings(max_examples=300, deadline=None)
@given(left=NUMBERS, right=NUMBERS, symbol=st.sampled_from(sorted(OPERATORS)))
def test_json_numbers_compare_as_the_spec_says(
        left: int | float, right: int | float, symbol: str) -> None:
    variables = {"args": json.loads(json.dumps({"left": left, "right": right}))}
    assert evaluate(f"args.left {symbol} args.right", variables) is \
        spec_compare(symbol, left, right)


@settings(max_examples=100, deadline=None)
@given(value=INTS, symbol=st.sampled_from(sorted(OPERATORS)), other=NUMBERS)
def test_an_integral_number_decides_as_the_same_number_written_with_a_fraction(
        value: int, symbol: str, other: int | float) -> None:
    # "5" and "5.0" in JSON (the model may send either) must decide alike wherever the
    # float is exact.
    if float(value) != value:
        return
    source = f"args.value {symbol} args.other"
    as_int = evaluate(source, {"args": {"value": value, "other": other}})
    as_float = evaluate(source, {"args": {"value": float(value), "other": other}})
    assert as_int == as_float


def test_membership_and_comprehensions_use_the_same_equality() -> None:
    cases = {
        "1 == 1.0": True, "1 < 1u": False, "1u < 2.5": True, "2u != 2": False,
        "[1, 2.0].exists(x, x == 2)": True, "2 in [1.0, 2.0]": True,
        "2.0 in {1: 'a', 2u: 'b'}": True, "3 in {1: 'a'}": False,
        "[1] == [1.0]": True, "{1: 1.0, 2u: 3u} == {1u: 1, 2: 3.0}": True,
        "9223372036854775807 == 9.223372036854776e18": False,
        "9223372036854775807 < 9.223372036854776e18": True,  # exactly (cel-go: false)
        "18446744073709551615u > 9.223372036854776e18": True,
        "double('NaN') == double('NaN')": False, "1 < double('NaN')": False,
        "1 >= double('NaN')": False, "1 != double('NaN')": True,
        "1 == 'one'": False,
    }
    for source, expected in cases.items():
        assert (source, evaluate(source, {})) == (source, expected)


REFUNDS = """\
apiVersion: callgate/v1
kind: ToolContract
metadata: {name: refund, version: "1", owner: t@example.com, description: refund an order}
spec:
  effect: read  # a read needs no idempotency key; the rule is what is under test
  arguments:
    type: object
    required: [accountId, amount]
    properties: {accountId: {type: string}, amount: {type: number}}
  lookups: [{name: account, collection: accounts, key: args.accountId}]
  rules:
    - name: within-balance
      expression: args.amount <= account.balance
      error_class: conflict
      message: The amount exceeds the balance.
  examples: [{arguments: {accountId: A-1, amount: 5}}]
---
apiVersion: callgate/v1
kind: AccessPolicy
metadata: {name: refund-access, version: "1", owner: t@example.com, description: anyone}
spec:
  rules:
    - name: anyone
      effect: allow
      tools: [refund]
      when: "true"
"""


def test_a_refund_of_an_int_amount_against_a_double_balance_passes(
        tmp_path: Path, ref: Any, compile_gate: Any) -> None:
    ref.write(tmp_path / "refund.yaml", REFUNDS)
    gate = compile_gate(tmp_path, world={"accounts": [{"id": "A-1", "balance": 1810.0}]})
    actor = {"id": "U-1"}
    passed = gate.check({"name": "refund", "arguments": {"accountId": "A-1", "amount": 5}},
                        actor=actor, now=NOW)
    assert passed.route == Route.EXECUTE, passed.agent_message
    too_much = gate.check({"name": "refund",
                           "arguments": {"accountId": "A-1", "amount": 1811}},
                          actor=actor, now=NOW)
    assert too_much.route != Route.EXECUTE
    assert "exceeds the balance" in too_much.agent_message
