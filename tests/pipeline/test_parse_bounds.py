"""Step 2 bounds the arguments and finds undeclared fields in one walk; it must answer as
the plain definition does: any bound broken anywhere → malformed; else the first undeclared
field in sorted order, depth first → unexpected_argument; else the call passes."""

from __future__ import annotations

import json
import re
from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from callgate_rules.documents.model import FLAT_AND_OPEN, InputLimits, flat_fields
from callgate_rules.pipeline.outcome import Rejection
from callgate_rules.pipeline.parse import _check_bounds, _plainly_within_bounds, first_undeclared
from callgate_rules.taxonomy import ErrorClass

LIMITS = InputLimits(max_bytes=10_000, max_depth=4, max_string_length=6, max_calls=3)
WIDE = InputLimits(max_bytes=10_000, max_depth=4, max_string_length=60, max_calls=3)
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def breaks_a_bound(value: Any, depth: int = 1, limits: InputLimits = LIMITS) -> bool:
    if depth > limits.max_depth:
        return True
    if isinstance(value, str):
        return bool(LONE_SURROGATE.search(value)) or len(value) > limits.max_string_length
    if isinstance(value, dict):
        return any(breaks_a_bound(k, depth, limits) or breaks_a_bound(v, depth + 1, limits)
                   for k, v in value.items())
    if isinstance(value, list):
        return any(breaks_a_bound(v, depth + 1, limits) for v in value)
    return False


def expected(value: Any, schema: dict[str, Any]) -> str:
    if breaks_a_bound(value):
        return "malformed"
    found = first_undeclared(value, schema, ())
    return f"unexpected {'.'.join(found)}" if found else "pass"


def actual(value: Any, schema: dict[str, Any]) -> str:
    try:
        undeclared = _check_bounds(value, schema, LIMITS)
    except Rejection as rejection:
        assert rejection.error_class == ErrorClass.MALFORMED
        return "malformed"
    if not undeclared:
        return "pass"
    found = first_undeclared(value, schema, ())
    assert found is not None  # the walk saw one: the exact search must find it
    return f"unexpected {'.'.join(found)}"


keys = st.sampled_from(["a", "b", "c", "long-key", "\ud800", "x_1"])
texts = st.text(alphabet="ab\u00e9\ud800", max_size=8)
values = st.recursive(
    st.none() | st.booleans() | st.integers() | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3),
    max_leaves=10,
)
schemas = st.recursive(
    st.just({}),
    lambda inner: st.builds(
        lambda properties, closed, patterned: {
            "type": "object",
            "properties": properties,
            **({"additionalProperties": False} if closed else {}),
            **({"patternProperties": {"^x_": {}}} if patterned else {}),
        },
        st.dictionaries(keys, inner, max_size=3), st.booleans(), st.booleans()),
    max_leaves=6,
)


@settings(max_examples=500)
@given(st.dictionaries(keys, values, max_size=4), schemas)
def test_one_walk_answers_as_the_plain_definition(arguments: dict[str, Any],
                                                  schema: dict[str, Any]) -> None:
    assert actual(arguments, schema) == expected(arguments, schema)


flat_schemas = st.builds(
    lambda properties, closed: {"type": "object", "properties": properties,
                                **({"additionalProperties": False} if closed else {})},
    st.dictionaries(keys, st.sampled_from([{}, {"type": "string"}, {"maxLength": 3}]),
                    max_size=3),
    st.booleans())


@settings(max_examples=500)
@given(st.dictionaries(keys, values, max_size=4), flat_schemas | schemas, st.booleans())
def test_the_short_cut_for_plain_text_answers_as_the_walk(
        arguments: dict[str, Any], schema: dict[str, Any], ascii_only: bool) -> None:
    """A short, plain, flat text cannot break a bound; a flat schema's undeclared fields are
    then found by the top-level keys alone. Step 2 takes that short cut; so must agree."""
    text = json.dumps(arguments, ensure_ascii=ascii_only, separators=(",", ":"))
    if not _plainly_within_bounds(text, WIDE):
        event("the walk")
        return
    event("the short cut")
    assert not breaks_a_bound(json.loads(text), limits=WIDE)
    declared = flat_fields(schema)
    if declared is not None:
        by_keys = declared is not FLAT_AND_OPEN and not arguments.keys() <= declared
        assert by_keys == _check_bounds(arguments, schema, WIDE)
