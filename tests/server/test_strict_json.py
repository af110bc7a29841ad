"""``strict_json``, the service's reading of every request body: msgspec reads it when its
colons prove no key repeats, else ``json`` does. Either way the value is exactly what
``json.loads`` with a hook that refuses repeated keys gives, and a repeated key is a 400."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from callgate_rules.canonical import RepeatedKey, unique_keys
from callgate_rules.server.problems import Problem, strict_json

keys = st.sampled_from(["a", "b", "a:b", "ü", "\\u003a", ""]) | st.text(max_size=4)
scalars = (st.none() | st.booleans() | st.integers(-2**70, 2**70)
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=6)
           | st.sampled_from(["::", "x:y", "\u2028", "\x00"]))


def members(children: Any) -> Any:
    """An object's text, its members as given: keys may repeat."""
    return st.lists(st.tuples(keys, children), max_size=4).map(
        lambda pairs: "{" + ",".join(f"{json.dumps(k)}:{v}" for k, v in pairs) + "}")


texts = st.recursive(
    scalars.map(json.dumps),
    lambda children: members(children) | st.lists(children, max_size=3).map(
        lambda items: "[" + ", ".join(items) + "]"),
    max_leaves=12)


def the_same(left: Any, right: Any) -> bool:
    """Equal, NaN included, and of the same types all the way down."""
    if isinstance(left, float) and isinstance(right, float) and math.isnan(left):
        return math.isnan(right)
    if type(left) is not type(right):
        return False
    if isinstance(left, dict):
        return list(left) == list(right) and all(the_same(left[k], right[k]) for k in left)
    if isinstance(left, list):
        return len(left) == len(right) and all(map(the_same, left, right))
    return bool(left == right)


@settings(max_examples=600, deadline=None)
@given(texts)
def test_a_body_reads_as_json_reads_it_or_is_refused_for_a_repeated_key(text: str) -> None:
    try:
        expected = json.loads(text, object_pairs_hook=unique_keys)
    except RepeatedKey:
        with pytest.raises(Problem) as refused:
            strict_json(text.encode())
        assert refused.value.status == 400 and "more than once" in str(refused.value.detail)
        return
    assert the_same(strict_json(text.encode()), expected)


@pytest.mark.parametrize("text", ['{"a": 1, "a": 1}', '{"a": {"b": ":", "b": ":"}}',
                                  '[{"k": "x"}, {"k": 1, "k": 2}]',
                                  '{"a\\u003a": 1, "a\\u003A": 2}'])
def test_repeats_the_colon_count_must_not_miss(text: str) -> None:
    """A repeated key anywhere, a value with colons in it, or a colon spelled as an escape
    (which the count cannot see: both keys of the last are "a:") is read exactly and
    refused."""
    with pytest.raises(Problem) as refused:
        strict_json(text.encode())
    assert refused.value.status == 400
