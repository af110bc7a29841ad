"""The function table itself (callgate_rules.cel.library) and its core library: every
signature reads as a type, names and overload ids are unique, core's implementations are
the compiler's runtime functions, and the conversions core completes (uint, type, dyn)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from callgate_rules.cel import types
from callgate_rules.cel.compiler import runtime
from callgate_rules.cel.errors import CelEvaluationError
from callgate_rules.cel.library import FUNCTIONS, lookup, nearest
from callgate_rules.cel.values import UINT64_MAX, CelType, UInt

LIBRARIES = {"core", "strings", "lists", "sets", "math", "regex", "encoders", "optionals",
             "kubernetes", "network"}


def call(name: str, *arguments: Any) -> Any:
    return FUNCTIONS[name].implementation(*arguments)


def test_every_signature_reads_as_a_type() -> None:
    for function in FUNCTIONS.values():
        for overload in function.overloads:
            for text in (*overload.parameters, overload.result):
                types.parse(text)


def test_overload_ids_are_unique_and_every_function_documented() -> None:
    seen: dict[str, str] = {}
    for function in FUNCTIONS.values():
        assert function.library in LIBRARIES
        assert function.doc and function.overloads
        for overload in function.overloads:
            assert seen.setdefault(overload.overload_id, function.name) == function.name, \
                overload.overload_id
            if overload.member:
                assert overload.parameters, f"{function.name}: a member needs a receiver"


def test_every_library_is_registered() -> None:
    assert {function.library for function in FUNCTIONS.values()} == LIBRARIES


def test_names_and_suggestions() -> None:
    assert lookup("split") is FUNCTIONS["split"]
    assert lookup("splt") is None
    assert nearest("splt") == "split"
    assert nearest("math.greates") == "math.greatest"
    assert nearest("zzzzzz") is None


def test_core_runs_the_compilers_runtime() -> None:
    assert FUNCTIONS["_+_"].implementation is runtime.FUNCTIONS["add"]
    assert FUNCTIONS["_==_"].implementation is runtime.equals
    assert FUNCTIONS["@in"].implementation is runtime.is_in
    assert FUNCTIONS["size"].implementation is runtime.FUNCTIONS["size"]
    assert FUNCTIONS["contains"].implementation is runtime.FUNCTIONS["contains"]


def test_arities() -> None:
    assert FUNCTIONS["substring"].arities() == {(True, 1), (True, 2)}
    assert FUNCTIONS["size"].arities() == {(False, 1), (True, 0)}
    assert FUNCTIONS["matches"].arities() == {(False, 2), (True, 1)}


@pytest.mark.parametrize(("name", "arguments", "expected", "expected_type"), [
    ("uint", (1,), 1, UInt),
    ("uint", (3.9,), 3, UInt),
    ("uint", ("18446744073709551615",), UINT64_MAX, UInt),
    ("uint", (UInt(7),), 7, UInt),
    ("int", (UInt(7),), 7, int),
    ("double", (UInt(7),), 7.0, float),
    ("string", (UInt(7),), "7", str),
    ("type", (1,), CelType("int"), CelType),
    ("type", (UInt(1),), CelType("uint"), CelType),
    ("type", (None,), CelType("null_type"), CelType),
    ("type", (CelType("int"),), CelType("type"), CelType),
    ("dyn", ([1],), [1], list),
    ("_<_", (1, 1.5), True, bool),
    ("_==_", (1, 1.0), True, bool),
    ("_&&_", (False, "not a bool"), False, bool),
    ("_||_", ("not a bool", True), True, bool),
    ("_?_:_", (True, 1, 2), 1, int),
    ("!_", (False,), True, bool),
])
def test_conversions_and_operators(name: str, arguments: tuple[Any, ...], expected: Any,
                                   expected_type: type) -> None:
    result = call(name, *arguments)
    assert result == expected
    assert type(result) is expected_type


@pytest.mark.parametrize(("name", "arguments", "message"), [
    ("uint", (-1,), "unsigned integer overflow"),
    ("uint", (math.nan,), "uint() range error"),
    ("uint", (2.0**64,), "uint() range error"),
    ("uint", ("-1",), "cannot convert"),
    ("uint", (True,), "no such overload"),
    ("int", (UInt(UINT64_MAX),), "integer overflow"),
    ("_&&_", (True, 1), "no such overload"),
    ("!_", (1,), "no such overload"),
])
def test_core_errors(name: str, arguments: tuple[Any, ...], message: str) -> None:
    with pytest.raises(CelEvaluationError) as raised:
        call(name, *arguments)
    assert str(raised.value).startswith(message)
