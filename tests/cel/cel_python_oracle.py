"""cel-python as a test-only oracle: its interpreter with no callgate code in the evaluation
path, except the current spec's numeric comparisons (cel-python predates heterogeneous numeric
equality and ordering, ``1 == 1.0``), and conversions between callgate's border values and
cel-python's types. callgate itself does not import cel-python (see ``callgate_rules.cel``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

import celpy
from celpy import celtypes
from celpy.evaluation import CELEvalError

from callgate_rules.cel.errors import CelEvaluationError

Evaluator = Callable[[Mapping[str, Any]], Any]


_CEL_NUMBER_TYPES = (celtypes.IntType, celtypes.UintType, celtypes.DoubleType)


def _is_number(value: Any) -> bool:
    # cel-python's arithmetic can hand back a plain float (DoubleType(0.0) + DoubleType(0.0)
    # is float 0.0), so plain numbers count too; bool is an int in Python but not in CEL.
    return isinstance(value, (*_CEL_NUMBER_TYPES, int, float)) and \
        not isinstance(value, celtypes.BoolType | bool)


def _plain_number(value: Any) -> int | float:
    return float(value) if isinstance(value, celtypes.DoubleType | float) else int(value)


def _equal(left: Any, right: Any) -> Any:
    """CEL ``==`` on cel-python values with the spec's heterogeneous numeric equality:
    numbers of any numeric type compare by value, a number and a non-number are unequal,
    lists and maps compare element-wise by this equality; everything else is cel-python's.
    Returns a ``BoolType`` or a ``CELEvalError``."""
    if isinstance(left, celpy.CELEvalError):
        return left
    if isinstance(right, celpy.CELEvalError):
        return right
    left_number, right_number = _is_number(left), _is_number(right)
    if left_number and right_number:
        return celtypes.BoolType(_plain_number(left) == _plain_number(right))
    if left_number or right_number:
        other = right if left_number else left
        if not isinstance(other, celtypes.ListType | celtypes.MapType):
            return celtypes.BoolType(False)
    if isinstance(left, celtypes.ListType) and isinstance(right, celtypes.ListType):
        return _all_equal(list(zip(left, right, strict=False)), len(left) == len(right))
    if isinstance(left, celtypes.MapType) and isinstance(right, celtypes.MapType):
        if len(left) != len(right):
            return celtypes.BoolType(False)
        pairs = []
        for key, value in left.items():
            found = _find_key(right, key)
            if found is None:
                return celtypes.BoolType(False)
            pairs.append((value, right[found]))
        return _all_equal(pairs, True)
    return celpy.evaluation.bool_eq(left, right)


def _all_equal(pairs: list[tuple[Any, Any]], same_length: bool) -> Any:
    # An unequal pair decides "false" even past a pair that cannot be compared.
    if not same_length:
        return celtypes.BoolType(False)
    error = None
    for left_item, right_item in pairs:
        try:
            result = _equal(left_item, right_item)
        except (TypeError, ValueError) as failure:
            result = celpy.CELEvalError("no such overload", type(failure), failure.args)
        if isinstance(result, celpy.CELEvalError):
            error = error or result
        elif not result:
            return celtypes.BoolType(False)
    return error if error is not None else celtypes.BoolType(True)


def _find_key(mapping: Mapping[Any, Any], key: Any) -> Any:
    """The key of ``mapping`` equal to ``key``: numeric keys find each other by value."""
    for candidate in mapping:
        if _is_number(key) and _is_number(candidate):
            if _plain_number(candidate) == _plain_number(key):
                return candidate
        elif type(candidate) is type(key) and candidate == key:
            return candidate
    return None


def _not_equal(left: Any, right: Any) -> Any:
    result = _equal(left, right)
    return result if isinstance(result, celpy.CELEvalError) else celtypes.BoolType(not result)


def _numeric_ordering(
    operator: Callable[[Any, Any], bool], standard: Callable[[Any, Any], Any],
) -> Callable[[Any, Any], Any]:
    """cel-python's ordering, with numbers of different numeric types ordered by value."""
    def ordered(left: Any, right: Any) -> Any:
        if _is_number(left) and _is_number(right) and type(left) is not type(right):
            return celtypes.BoolType(operator(_plain_number(left), _plain_number(right)))
        return standard(left, right)

    return ordered


def _is_in(item: Any, container: Any) -> Any:
    """CEL ``in`` by :func:`_equal`: list elements, or map keys (numeric keys by value).
    A match decides "true" past elements that cannot be compared; without one, such an
    element makes the result an error."""
    if isinstance(item, celpy.CELEvalError):
        return item
    if isinstance(container, celtypes.MapType):
        return celtypes.BoolType(_find_key(container, item) is not None)
    if not isinstance(container, celtypes.ListType):
        return celpy.evaluation.operator_in(item, container)
    error = None
    for element in container:
        try:
            result = _equal(element, item)
        except (TypeError, ValueError) as failure:
            result = celpy.CELEvalError("no such overload", type(failure), failure.args)
        if isinstance(result, celpy.CELEvalError):
            error = error or result
        elif result:
            return celtypes.BoolType(True)
    return error if error is not None else celtypes.BoolType(False)


# The comparisons with the current spec's numeric semantics, which cel-python (it answers
# ``1 == 1.0`` with "no such overload") does not have; the fallback and the conformance
# harness's plain cel-python evaluator both run with them.
SPEC_COMPARISONS: Mapping[str, Callable[..., Any]] = {
    "_==_": _equal,
    "_!=_": _not_equal,
    "_<_": _numeric_ordering(lambda a, b: a < b, celpy.evaluation.bool_lt),
    "_<=_": _numeric_ordering(lambda a, b: a <= b, celpy.evaluation.bool_le),
    "_>_": _numeric_ordering(lambda a, b: a > b, celpy.evaluation.bool_gt),
    "_>=_": _numeric_ordering(lambda a, b: a >= b, celpy.evaluation.bool_ge),
    "_in_": _is_in,
}



def cel_python_evaluator(source: str) -> Evaluator:
    """cel-python's interpreter for ``source``, with ``SPEC_COMPARISONS``."""
    environment = celpy.Environment()
    program = environment.program(environment.compile(source),
                                  functions=dict(SPEC_COMPARISONS))

    def evaluate(variables: Mapping[str, Any]) -> Any:
        activation = {name: to_cel(value) for name, value in variables.items()}
        try:
            result = program.evaluate(activation)
        except CELEvalError as error:
            raise CelEvaluationError(str(error.args[0] if error.args else error)) from None
        except (TypeError, ValueError, KeyError, ZeroDivisionError, OverflowError) as error:
            raise CelEvaluationError(str(error)) from None
        if isinstance(result, CELEvalError):
            raise CelEvaluationError(str(result.args[0] if result.args else result))
        return from_cel(result)

    return evaluate


def to_cel(value: Any) -> Any:
    """Plain Python → cel-python's types."""
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int):
        return celtypes.IntType(value)
    if isinstance(value, float):
        return celtypes.DoubleType(value)
    if isinstance(value, str):
        return celtypes.StringType(value)
    if value is None:
        return None
    if isinstance(value, datetime):
        return celtypes.TimestampType(value)
    if isinstance(value, timedelta):
        return celtypes.DurationType(value)
    if isinstance(value, Mapping):
        return celtypes.MapType(
            {celtypes.StringType(k): to_cel(v) for k, v in value.items()}
        )
    if isinstance(value, list | tuple):
        return celtypes.ListType([to_cel(v) for v in value])
    if isinstance(value, bytes):
        return celtypes.BytesType(value)
    return value


def from_cel(value: Any) -> Any:
    """cel-python's types → plain Python."""
    if isinstance(value, celtypes.BoolType):
        return bool(value)
    if isinstance(value, celtypes.TimestampType):
        return datetime.fromtimestamp(value.timestamp(), tz=value.tzinfo)
    if isinstance(value, celtypes.DurationType):
        return timedelta(seconds=value.total_seconds())
    if isinstance(value, celtypes.IntType | celtypes.UintType):
        return int(value)
    if isinstance(value, celtypes.DoubleType):
        return float(value)
    if isinstance(value, celtypes.StringType):
        return str(value)
    if isinstance(value, celtypes.BytesType):
        return bytes(value)
    if isinstance(value, Mapping):
        return {from_cel(k): from_cel(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_cel(v) for v in value]
    return value
