"""Invariants of run intents, as hypothesis properties: a declaration ``widenings`` finds
nothing in is within the bound one for every call (sound narrowing); a value an intent
names is within it and one it does not name is not; an intent read back from what the
store keeps is the same intent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from callgate_rules.documents.compiler import load
from callgate_rules.intent import Spent, compile_intent, leaves, widenings

REPO = Path(__file__).resolve().parents[2]
CONFIG = load([REPO / "examples" / "banking" / "contracts",
               REPO / "examples" / "banking" / "policies",
               REPO / "examples" / "intents" / "routing.yaml"])
IBANS = ["DE89370400440532013000", "GB29NWBK60161331926819", "NL91ABNA0417164300"]
AMOUNTS = st.sampled_from([0, 1, 5, 10, 10.0, 50, 99.5, 100, 950, 1000])


@st.composite
def amount_bounds(draw: st.DrawFn) -> dict[str, Any]:
    bound: dict[str, Any] = {}
    if draw(st.booleans()):
        bound["minimum"] = draw(AMOUNTS)
    if draw(st.booleans()):
        bound["maximum"] = draw(AMOUNTS)
    if draw(st.booleans()):
        bound["one_of"] = draw(st.lists(AMOUNTS, min_size=1, max_size=3))
    if "minimum" in bound and "maximum" in bound and bound["minimum"] > bound["maximum"]:
        bound["minimum"], bound["maximum"] = bound["maximum"], bound["minimum"]
    return bound or {"maximum": draw(AMOUNTS)}


@st.composite
def intents(draw: st.DrawFn) -> dict[str, Any]:
    send: dict[str, Any] = {}
    if draw(st.booleans()):
        send["calls"] = draw(st.integers(0, 3))
    arguments: dict[str, Any] = {}
    if draw(st.booleans()):
        arguments["amount"] = draw(amount_bounds())
    if draw(st.booleans()):
        arguments["recipient"] = ({"equals": draw(st.sampled_from(IBANS))} if draw(
            st.booleans()) else {"one_of": draw(st.lists(st.sampled_from(IBANS), min_size=1,
                                                         max_size=3, unique=True))})
    if arguments:
        send["arguments"] = arguments
    if draw(st.booleans()):
        send["when"] = draw(st.sampled_from(["args.amount < 500", "args.subject != ''"]))
    tools: dict[str, Any] = {"sendMoney": send}
    if draw(st.booleans()):
        tools["readInbox"] = {}
    intent: dict[str, Any] = {"tools": tools}
    if draw(st.booleans()):
        intent["totals"] = {"paid": {"tools": ["sendMoney"], "argument": "amount",
                                     "at_most": draw(AMOUNTS)}}
    return intent


calls = st.tuples(st.sampled_from(["sendMoney", "readInbox"]), st.sampled_from(IBANS), AMOUNTS,
                  st.sampled_from(["Rent", ""]), st.integers(0, 3), AMOUNTS)


@settings(max_examples=400, deadline=None)
@given(intents(), intents(), st.lists(calls, min_size=1, max_size=8))
def test_an_intent_with_no_widening_is_within_the_bound_one(
        new: dict[str, Any], old: dict[str, Any], proposed: list[Any]) -> None:
    narrower, bound = compile_intent(new, CONFIG), compile_intent(old, CONFIG)
    if widenings(narrower, bound):
        return
    for tool, recipient, amount, subject, made, so_far in proposed:
        arguments = ({"recipient": recipient, "amount": amount, "subject": subject}
                     if tool == "sendMoney" else {"limit": 5})
        spent = Spent()
        spent.calls[tool] = made
        spent.totals["paid"] = so_far
        if not leaves(narrower, tool, arguments, spent):
            assert not leaves(bound, tool, arguments, spent), (new, old, arguments)


@settings(max_examples=200, deadline=None)
@given(intents())
def test_every_intent_narrows_itself_and_reads_back_the_same(written: dict[str, Any]) -> None:
    intent = compile_intent(written, CONFIG)
    assert widenings(intent, intent) == []
    again = compile_intent(intent.as_data(), CONFIG)
    assert again.as_data() == intent.as_data()
    assert widenings(again, intent) == [] and widenings(intent, again) == []


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(IBANS), min_size=1, max_size=3, unique=True),
       st.sampled_from(IBANS))
def test_a_value_named_is_within_and_one_not_named_is_not(named: list[str],
                                                          proposed: str) -> None:
    intent = compile_intent({"tools": {"sendMoney": {"arguments": {
        "recipient": {"one_of": named}}}}}, CONFIG)
    left = leaves(intent, "sendMoney", {"recipient": proposed, "amount": 1, "subject": ""},
                  None)
    assert (not left) == (proposed in named)


@given(st.sampled_from([1, 1.0, 100]), st.sampled_from([True, False]))
def test_a_boolean_is_never_a_number(number: float, flag: bool) -> None:
    intent = compile_intent({"tools": {"sendMoney": {"arguments": {
        "amount": {"equals": number}}}}}, CONFIG)
    assert leaves(intent, "sendMoney", {"amount": flag}, None)
    assert not leaves(intent, "sendMoney", {"amount": float(number)}, None)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from([0.0, 1.0, 2.5, -1.0])
    | st.sampled_from(["a", "b", "A", "é", "é"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["x", "y"]), inner, max_size=2), max_leaves=6)


def json_equal(one: Any, two: Any) -> bool:
    """JSON equality written out, the oracle: numbers by value, a boolean never a number,
    lists and objects item by item."""
    if isinstance(one, bool) or isinstance(two, bool):
        return type(one) is type(two) and one == two
    if isinstance(one, int | float) and isinstance(two, int | float):
        return bool(one == two)
    if isinstance(one, dict) and isinstance(two, dict):
        return one.keys() == two.keys() and all(json_equal(one[k], two[k]) for k in one)
    if isinstance(one, list) and isinstance(two, list):
        return len(one) == len(two) and all(map(json_equal, one, two))
    return type(one) is type(two) and bool(one == two)


@given(JSON_VALUES, JSON_VALUES)
def test_a_values_key_is_shared_exactly_by_the_same_value(one: Any, two: Any) -> None:
    from callgate_rules.intent.model import value_key
    from callgate_rules.intent.within import same_value
    assert (value_key(one) == value_key(two)) == json_equal(one, two) == same_value(one, two)


def test_a_large_set_narrows_by_keys() -> None:
    old = compile_intent({"tools": {"sendMoney": {"arguments": {"subject": {
        "one_of": [f"s{n}" for n in range(1024)]}}}}}, CONFIG)
    new = compile_intent({"tools": {"sendMoney": {"arguments": {"subject": {
        "one_of": [f"s{n}" for n in range(1023, -1, -1)]}}}}}, CONFIG)
    assert widenings(new, old) == []
    wider = compile_intent({"tools": {"sendMoney": {"arguments": {"subject": {
        "one_of": [*(f"s{n}" for n in range(1023)), "elsewhere"]}}}}}, CONFIG)
    assert widenings(wider, old) == [
        "widens sendMoney's subject: allows 'elsewhere', which the bound does not"]
