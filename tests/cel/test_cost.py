"""The run-time cost budget (``cel.compiler.runtime.cost``) and the load-time estimate
(``cel.cost``).

The case that held one decision for 26 s (three nested comprehensions over a 700-item,
4 KB argument) ends at the budget, in counted operations, and the rule fails closed with
"could not be checked". Budgets are asserted as operation counts, never as wall time.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from callgate_rules import Gate
from callgate_rules.cel.compiler import python_source
from callgate_rules.cel.compiler.runtime import cost as meter
from callgate_rules.cel.cost import Declared, Fallback, estimate
from callgate_rules.cel.errors import CostExceeded
from callgate_rules.cel.expression import CelEvaluationError, compile_expression, parse
from callgate_rules.cel.library import FUNCTIONS
from tests.authoring.test_lint import POLICY, ROUTING

TRIPLE = "args.items.all(a, args.items.all(b, args.items.all(c, a + b + c >= 0)))"
SEVEN_HUNDRED = list(range(700))  # "[0, 1, ..., 699]": under 4 KB of JSON


def test_the_26_second_case_stops_at_the_budget() -> None:
    assert len(json.dumps(SEVEN_HUNDRED)) < 4096
    expression = compile_expression(TRIPLE)
    with pytest.raises(CostExceeded, match="cost budget exceeded"):
        expression({"args": {"items": SEVEN_HUNDRED}})
    # 700³ passes would be 343 million; the evaluation spent exactly its budget, no more
    assert meter.spent() == meter.RUNTIME_BUDGET


def test_the_budget_is_per_evaluation() -> None:
    expression = compile_expression("args.items.all(a, a >= 0)")
    for _ in range(3):  # each evaluation starts afresh: none inherits what another spent
        assert expression({"args": {"items": SEVEN_HUNDRED}}) is True
        assert meter.spent() == 700 * 4  # the pass, ``>=``, ``a`` and ``0``


def test_no_operator_absorbs_an_exceeded_budget() -> None:
    # ``||`` and ``all`` absorb an error when another operand decides; never this one
    variables = {"args": {"items": SEVEN_HUNDRED, "flag": True}}
    for source in (f"({TRIPLE}) || args.flag", f"args.flag || ({TRIPLE})",
                   f"[1].exists(x, ({TRIPLE}) || x == 1)",
                   f"[0, 1].all(x, x == 0 || ({TRIPLE}))", f"has(args.items.map(i, {TRIPLE}).a)"):
        compiled = compile_expression(source)
        if source.startswith("args.flag ||"):
            assert compiled(variables) is True  # decided before the loop ran
            continue
        with pytest.raises(CostExceeded):
            compiled(variables)


def test_an_expression_without_a_loop_is_not_metered() -> None:
    source = python_source(parse("args.a == 1 && size(args.b) < 3"), FUNCTIONS)
    assert "metering" not in source and "_metered" not in source
    assert "_start_metering()" in python_source(parse("args.b.exists(x, x == 1)"), FUNCTIONS)


# The whole decision -----------------------------------------------------------------------

CONTRACT = """\
apiVersion: callgate/v1
kind: ToolContract
metadata: {{name: tagItems, version: "1.0.0", owner: t@example.com, description: tag items}}
spec:
  effect: read
  arguments:
    type: object
    required: [items]
    properties:
      items: {{type: array, items: {{type: integer}}}}
  rules:
    - name: sums
      expression: "{rule}"
      error_class: invalid_argument
      on_error: {on_error}
      message: The items do not add up.
  examples:
    - arguments: {{items: [1, 2]}}
"""


def gate(tmp_path: Path, on_error: str) -> Gate:
    (tmp_path / "contracts").mkdir()
    (tmp_path / "policies").mkdir()
    (tmp_path / "contracts" / "tag.yaml").write_text(
        CONTRACT.format(rule=TRIPLE, on_error=on_error), encoding="utf-8")
    (tmp_path / "policies" / "policy.yaml").write_text(POLICY, encoding="utf-8")
    (tmp_path / "policies" / "routing.yaml").write_text(ROUTING, encoding="utf-8")
    return Gate.from_paths(tmp_path / "contracts", tmp_path / "policies")


def proposal(items: list[int]) -> str:
    return json.dumps({"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "tagItems", "arguments": json.dumps({"items": items})}}]})


@pytest.mark.parametrize("on_error", ["fail_closed", "ignore"])
def test_a_rule_past_the_budget_fails_closed_as_could_not_be_checked(
        tmp_path: Path, on_error: str) -> None:
    decision = gate(tmp_path, on_error).check(
        proposal(SEVEN_HUNDRED), actor={"id": "u", "tenant": "t"},
        now=datetime(2026, 1, 1, tzinfo=UTC))
    assert decision.error_class is not None and str(decision.error_class) == "invalid_argument"
    assert "could not be checked" in decision.agent_message
    assert "could not be checked" in (decision.user_message or "")
    assert meter.spent() == meter.RUNTIME_BUDGET  # stopped at the budget (even re-worded)
    # the same rule over a few items decides as before
    assert gate_again(tmp_path, on_error).check(
        proposal([1, 2, 3]), actor={"id": "u", "tenant": "t"},
        now=datetime(2026, 1, 1, tzinfo=UTC)).error_class is None


def gate_again(tmp_path: Path, on_error: str) -> Gate:
    other = tmp_path / "small"
    other.mkdir()
    return gate(other, on_error)


# A hypothesis test: the budget bounds evaluation; within it, nothing changes -------------


class Counted(list[int]):
    """A list that counts the elements the loops actually took from it."""

    taken = 0

    def __iter__(self) -> Iterator[int]:
        for element in super().__iter__():
            Counted.taken += 1
            yield element


MACROS = ("all", "exists", "map", "filter")


@st.composite
def nested(draw: st.DrawFn, depth: int, bound: tuple[str, ...] = ()) -> str:
    """A bool expression with ``depth`` nested comprehensions over ``xs`` and ``ys``."""
    if depth == 0:
        total = " + ".join(bound) or "0"
        modulus = draw(st.integers(2, 5))
        return f"({total}) % {modulus} == {draw(st.integers(0, modulus - 1))}"
    variable = f"v{len(bound)}"
    over = draw(st.sampled_from(["xs", "ys"]))
    body = draw(nested(depth - 1, (*bound, variable)))
    macro = draw(st.sampled_from(MACROS))
    if macro in ("all", "exists"):
        return f"{over}.{macro}({variable}, {body})"
    if macro == "filter":
        return f"size({over}.filter({variable}, {body})) >= {draw(st.integers(0, 3))}"
    return f"true in {over}.map({variable}, {body})"


ELEMENTS = st.lists(st.integers(0, 9), max_size=25)


@settings(max_examples=150, deadline=None)
@given(source=st.integers(1, 3).flatmap(nested), xs=ELEMENTS, ys=ELEMENTS,
       budget=st.integers(1, 20_000))
def test_the_budget_bounds_nested_comprehensions(source: str, xs: list[int], ys: list[int],
                                                 budget: int) -> None:
    expression = compile_expression(source)
    with meter.budget(10**12):
        expected = expression({"xs": xs, "ys": ys})
    Counted.taken = 0
    with meter.budget(budget):
        try:
            found: Any = expression({"xs": Counted(xs), "ys": Counted(ys)})
        except CostExceeded:
            found = CostExceeded
        spent = meter.spent()
    # no loop ever ran past the budget: every element taken was charged for first
    assert Counted.taken <= spent <= budget
    if found is not CostExceeded:  # finished within the budget: as without one
        assert found == expected


def test_the_estimate_bounds_what_the_meter_charges() -> None:
    """Inputs within their declared bounds never cost more at run time than estimated."""
    schema = {"type": "object", "properties": {
        "items": {"type": "array", "maxItems": 40, "items": {"type": "integer"}}}}
    found = estimate(parse(TRIPLE), {"args": Declared(schema, "args", "spec.arguments",
                                                      Fallback.of(65536, 8192))})
    with meter.budget(10**12):
        compile_expression(TRIPLE)({"args": {"items": list(range(40))}})
    assert 40**3 <= meter.spent() <= found.cost


def test_an_evaluation_error_is_still_an_evaluation_error() -> None:
    with pytest.raises(CelEvaluationError) as caught:
        compile_expression("args.items.all(a, a / 0 == 1)")({"args": {"items": [1]}})
    assert not isinstance(caught.value, CostExceeded)


# Functions whose work grows with a value: charged by its size, at the time of the call ----

# The security review's reproduction: 8,000 strings, about 70 KB of JSON.
EIGHT_THOUSAND = [f"item-{number:04d}" for number in range(8000)]


@pytest.mark.parametrize("source", [
    "args.items.all(x, args.items.sort().size() > 0)",  # ran 73.5 s, charged 56,000
    "args.items.all(x, x in args.items)",  # grows with the square of the list
    "args.items.all(x, args.items.distinct().size() > 0)",
    "args.items.all(x, args.items == args.items)",
    "args.items.all(x, args.items.join(',').size() > 0)",
    "args.items.all(x, !args.text.contains('zz'))",
    "args.items.all(x, !args.text.matches('z+$'))",
    "args.items.all(x, args.text.split('b').size() > 0)",
    "args.items.exists(x, sets.contains(args.items, args.items) && x == 'none')",
])
def test_a_scan_inside_a_loop_is_charged_by_what_it_scans(source: str) -> None:
    assert len(json.dumps(EIGHT_THOUSAND)) > 70_000
    variables = {"args": {"items": Counted(range(8000)) if "text" in source
                          else EIGHT_THOUSAND, "text": "ab" * 35_000}}
    Counted.taken = 0
    with pytest.raises(CostExceeded, match="cost budget exceeded"):
        compile_expression(source)(variables)
    assert meter.spent() == meter.RUNTIME_BUDGET
    assert Counted.taken <= 1000  # the loop stopped within its first thousand passes


def test_the_review_case_fails_closed_in_a_decision(tmp_path: Path) -> None:
    (tmp_path / "contracts").mkdir()
    (tmp_path / "policies").mkdir()
    contract = CONTRACT.format(rule="args.items.all(x, x in args.items)",
                               on_error="fail_closed").replace("type: integer", "type: string")
    (tmp_path / "contracts" / "tag.yaml").write_text(
        contract.replace("items: [1, 2]", "items: [a, b]"), encoding="utf-8")
    (tmp_path / "policies" / "policy.yaml").write_text(POLICY, encoding="utf-8")
    (tmp_path / "policies" / "routing.yaml").write_text(ROUTING, encoding="utf-8")
    checked = Gate.from_paths(tmp_path / "contracts", tmp_path / "policies")
    # 4,000 strings: what fits the parse step's 64 KB of model output, 16 million compares
    many = [str(number) for number in range(4000)]
    decision = checked.check(proposal(many), actor={"id": "u", "tenant": "t"},  # type: ignore[arg-type]
                             now=datetime(2026, 1, 1, tzinfo=UTC))
    assert "could not be checked" in decision.agent_message
    assert meter.spent() == meter.RUNTIME_BUDGET


def test_a_scan_is_charged_once_per_call() -> None:
    expression = compile_expression("args.items.all(x, x in args.items)")
    assert expression({"args": {"items": ["a", "b", "c"]}}) is True
    # each of the 3 passes: 5 for the pass and its 4 nodes, 3 for the list ``in`` scans
    assert meter.spent() == 3 * (5 + 3)
    nested = compile_expression("args.items.exists(x, x in args.lists)")
    assert nested({"args": {"items": [[9]], "lists": [[1, 2], [3], [[4, 5], [6]]]}}) is False
    assert meter.spent() == 1 * 5 + 3 + 2 + 1 + 2 + 2 + 1  # the lists inside count too


def test_an_expression_without_a_loop_or_list_function_charges_nothing() -> None:
    # each scan once, linearly, over an input the parse step bounded: left unmetered, and
    # its code as it was
    source = "'a' in args.items && args.items == args.other && args.text.contains('z')"
    generated = python_source(parse(source), FUNCTIONS)
    assert "_scanned" not in generated and "_metered" not in generated
    assert compile_expression(source)(
        {"args": {"items": EIGHT_THOUSAND, "other": [], "text": "z"}}) is False
    # a loop or a list function anywhere in the expression meters every scan in it
    for extra in ("args.items.all(x, true)", "args.items.sort().size() > 0"):
        metered = python_source(parse(f"{source} && {extra}"), FUNCTIONS)
        assert "_start_metering()" in metered and "_metered_in(" in metered
        assert "_scanned(variables['args']['text'])" in metered


def test_list_functions_without_a_loop_are_charged() -> None:
    # a sort compares in Python, about a microsecond a comparison: metered even loop-free
    source = " && ".join(["args.items.sort().size() > 0"] * 3)
    expression = compile_expression(source)
    assert expression({"args": {"items": EIGHT_THOUSAND}}) is True
    assert meter.spent() == 3 * 8000 * 13  # n·⌈log₂ n⌉ per sort
    with meter.budget(250_000), pytest.raises(CostExceeded, match="sort over 8,000 elements"):
        expression({"args": {"items": EIGHT_THOUSAND}})  # the third sort is not started
    assert meter.spent() == 250_000


SCANS = (
    "{list}.sort().size() > {n}",
    "{list}.distinct().size() > {n}",
    "{n} in {list}",
    "{list} == {list}",
    "{list}.map(z, string(z)).join('-').contains('{n}')",
    "sets.contains({list}, [{n}])",
    "{list}.sum() > {n}",
    "string({n}).matches('^[0-4]')",
)


@st.composite
def scanning(draw: st.DrawFn, depth: int, bound: tuple[str, ...] = ()) -> str:
    """A bool expression with ``depth`` nested comprehensions over ``xs`` and ``ys`` whose
    body calls functions that scan a list (or a string) by its size."""
    lists = ("xs", "ys")
    if depth == 0:
        parts = [draw(st.sampled_from(SCANS)).format(
            list=draw(st.sampled_from(lists)),
            n=draw(st.sampled_from((*bound, "3"))))
            for _ in range(draw(st.integers(1, 2)))]
        return " || ".join(f"({part})" for part in parts)
    variable = f"v{len(bound)}"
    over = draw(st.sampled_from(lists))
    body = draw(scanning(depth - 1, (*bound, variable)))
    macro = draw(st.sampled_from(MACROS))
    if macro in ("all", "exists"):
        return f"{over}.{macro}({variable}, {body})"
    if macro == "filter":
        return f"size({over}.filter({variable}, {body})) >= {draw(st.integers(0, 3))}"
    return f"true in {over}.map({variable}, {body})"


@settings(max_examples=150, deadline=None)
@given(source=st.integers(1, 3).flatmap(scanning), xs=ELEMENTS, ys=ELEMENTS,
       budget=st.integers(1, 40_000))
def test_the_budget_bounds_scans_in_nested_comprehensions(
        source: str, xs: list[int], ys: list[int], budget: int) -> None:
    expression = compile_expression(source)
    with meter.budget(10**12):
        try:
            expected: Any = expression({"xs": xs, "ys": ys})
        except CelEvaluationError as error:  # an honest CEL error, the same under a budget
            expected = type(error)
        unbudgeted = meter.spent()
    with meter.budget(budget):
        try:
            found: Any = expression({"xs": xs, "ys": ys})
        except CostExceeded:
            found = CostExceeded
        except CelEvaluationError as error:
            found = type(error)
        spent = meter.spent()
    assert spent <= budget  # the charge never passes the budget: the call that would is refused
    if found is not CostExceeded:  # finished within the budget: as without one
        assert found == expected and spent == unbudgeted
    else:
        assert unbudgeted > budget
    # and the load-time estimate for lists of this size is at least what was charged
    schema = {"type": "array", "maxItems": 25, "items": {"type": "integer"}}
    bound = {name: Declared(schema, name, "spec.arguments", Fallback.of(65536, 8192))
             for name in ("xs", "ys")}
    assert estimate(parse(source), bound).cost >= unbudgeted


@pytest.mark.parametrize("source", [
    "ys.all(v0, sets.contains(ys, [v0]))", "ys.all(v, sets.intersects(ys, xs))",
    "ys.all(v, sets.equivalent(xs, ys))", "ys.all(v, math.greatest(xs) >= v)",
    "lists.range(10).all(i, ys[i] >= 0)", "lists.range(size(ys)).all(i, ys[i] in xs)",
    "lists.range(ys.size()).all(i, sets.contains(xs, [ys[i]]))"])
def test_a_library_function_on_a_dotted_name_is_priced_as_the_compiler_reads_it(
        source: str) -> None:
    # ``sets.contains(a, b)`` scans a and b: not a member ``contains`` of a variable ``sets``
    # (which the estimate priced as one operation, under what the meter charged); and
    # ``lists.range(size(ys))`` gives as many numbers as ``ys`` may hold
    schema = {"type": "array", "maxItems": 25, "items": {"type": "integer"}}
    bound = {name: Declared(schema, name, "spec.arguments", Fallback.of(65536, 8192))
             for name in ("xs", "ys")}
    with meter.budget(10**12):
        compile_expression(source)({"xs": list(range(25)), "ys": list(range(25))})
        charged = meter.spent()
    # at least what the meter charges, and not far above it (a range of known size)
    assert charged <= estimate(parse(source), bound).cost <= charged * 1.5
