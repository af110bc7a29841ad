"""The hot path reads JSON with msgspec; a text must mean exactly what it means to ``json``.

Wherever msgspec accepts a text, its value must equal ``json.loads``'s, types and signs
included (1 is not 1.0, -0.0 is not 0.0, a 30-digit integer stays an integer); wherever it
refuses one, ``decode_json`` must answer as ``json.loads`` does."""

from __future__ import annotations

import json
import math
from typing import Any

import msgspec
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from callgate_rules.pipeline.outcome import Rejection
from callgate_rules.pipeline.propose import decode_json
from callgate_rules.taxonomy import ErrorClass

scalars = (
    st.none() | st.booleans()
    | st.integers() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner,
                                                                 max_size=4),
    max_leaves=12,
)


def same(a: Any, b: Any) -> bool:
    """Equal, with the same types all the way down, the same sign of zero, NaN for NaN."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        if math.isnan(a):
            return math.isnan(b)
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


def json_outcome(text: str) -> tuple[str, Any]:
    try:
        return "value", json.loads(text)
    except (ValueError, RecursionError):
        return "refused", None


def decode_outcome(text: str) -> tuple[str, Any]:
    try:
        return "value", decode_json(text, "text is")
    except Rejection as rejection:
        assert rejection.error_class == ErrorClass.MALFORMED
        return "refused", None


@settings(max_examples=400)
@given(values, st.booleans(), st.sampled_from([None, 2]))
def test_a_json_text_decodes_to_what_json_reads(value: Any, ascii_only: bool,
                                                indent: int | None) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only, indent=indent)
    kind, decoded = decode_outcome(text)
    assert kind == "value" and same(decoded, json.loads(text))


@settings(max_examples=400)
@given(st.text(alphabet='{}[]":,0123456789.eE+-tfrueanlsNIfy\\u \ud800\ufeff', max_size=30))
@example('{"a":"\\ud800"}')  # an escaped lone surrogate: json reads it, msgspec does not
@example("[NaN, Infinity]")
@example("1e400")
@example("123456789012345678901234567890")
@example('{"a": -9223372036854775809}')
@example('{"a": 1, "a": 2}')
@example("-0.0")
@example("\ufeff{}")
def test_any_text_is_read_or_refused_as_json_does(text: str) -> None:
    expected_kind, expected = json_outcome(text)
    kind, decoded = decode_outcome(text)
    assert kind == expected_kind
    if kind == "value":
        assert same(decoded, expected)


def test_the_fast_reader_refuses_what_it_cannot_read_exactly() -> None:
    # The premise of the fallback: msgspec refuses, rather than bends, these texts.
    decoder = msgspec.json.Decoder()
    for text in ("[NaN]", "1e400", '"\\ud800"'):
        with pytest.raises((msgspec.DecodeError, RecursionError, UnicodeError)):
            decoder.decode(text)


def test_deep_nesting_is_malformed_not_a_crash() -> None:
    with pytest.raises(Rejection) as caught:
        decode_json("[" * 100_000 + "]" * 100_000, "arguments are")
    assert caught.value.error_class == ErrorClass.MALFORMED
