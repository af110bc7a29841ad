"""``string.format(list)`` from cel-go's strings extension, and the text of a value under
``%s``.

Clauses: ``%s`` (any value but an optional), ``%d`` (int, uint; NaN and infinities too),
``%f`` and ``%e`` with an optional precision (``%.3f``; doubles, ints and uints; 6 digits by
default), ``%b`` (ints, uints, bools), ``%o`` (ints, uints), ``%x``/``%X`` (ints, uints,
and strings and bytes as the hex of their bytes), ``%%``. Messages are cel-go's, as the
conformance file ``string_ext.textproto`` has them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from callgate_rules.cel.compiler.runtime.conversions import to_string
from callgate_rules.cel.compiler.runtime.kinds import kind, kind_or_python_type, no_overload
from callgate_rules.cel.errors import CelEvaluationError

# What cel-go calls the kinds in its messages.
_TYPE_NAMES = {
    "null": "null_type",
    "timestamp": "google.protobuf.Timestamp",
    "duration": "google.protobuf.Duration",
}


def type_name(value: Any) -> str:
    found = kind_or_python_type(value)
    return _TYPE_NAMES.get(found, found)


def _special(value: float) -> str | None:
    """NaN and the infinities as every numeric clause writes them."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return None


def _failure(message: str) -> CelEvaluationError:
    return CelEvaluationError(f"error during formatting: {message}")


def text_of(value: Any) -> str:
    """A value under ``%s``: strings as they are, lists and maps written out (map entries
    sorted by their text), doubles as ``string(x)`` writes them."""
    value_kind = kind_or_python_type(value)
    if value_kind == "string":
        return str(value)
    if value_kind == "bool":
        return "true" if value else "false"
    if value_kind in ("int", "uint"):
        return str(int(value))
    if value_kind == "double":
        return _special(value) or to_string(value)
    if value_kind == "bytes":
        return bytes(value).decode("utf-8", errors="replace")
    if value_kind == "null":
        return "null"
    if value_kind == "type":
        return str(value.name)
    if value_kind in ("timestamp", "duration"):
        return to_string(value)
    if value_kind == "list":
        return "[" + ", ".join(text_of(item) for item in value) + "]"
    if value_kind == "map":
        entries = sorted(f"{text_of(key)}: {text_of(item)}" for key, item in value.items())
        return "{" + ", ".join(entries) + "}"
    raise _failure(
        "string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, "
        f"types, durations, and timestamps, was given {type_name(value)}")


def _decimal(value: Any, precision: int | None) -> str:
    value_kind = kind_or_python_type(value)
    if value_kind in ("int", "uint"):
        return str(int(value))
    if value_kind == "double" and _special(value) is not None:
        return _special(value) or ""
    raise _failure(f"decimal clause can only be used on integers, was given {type_name(value)}")


def _floating(clause: str, name: str) -> Callable[[Any, int | None], str]:
    def formatted(value: Any, precision: int | None) -> str:
        value_kind = kind_or_python_type(value)
        if value_kind not in ("double", "int", "uint"):
            raise _failure(
                f"{name} clause can only be used on doubles, was given {type_name(value)}")
        number = float(value)
        digits = 6 if precision is None else precision
        return _special(number) or format(number, f".{digits}{clause}")

    return formatted


def _binary(value: Any, precision: int | None) -> str:
    value_kind = kind_or_python_type(value)
    if value_kind == "bool":
        return "1" if value else "0"
    if value_kind in ("int", "uint"):
        return format(int(value), "b")
    raise _failure(f"only integers and bools can be formatted as binary, was given "
                   f"{type_name(value)}")


def _octal(value: Any, precision: int | None) -> str:
    if kind_or_python_type(value) in ("int", "uint"):
        return format(int(value), "o")
    raise _failure(f"octal clause can only be used on integers, was given {type_name(value)}")


def _hexadecimal(value: Any, precision: int | None) -> str:
    value_kind = kind_or_python_type(value)
    if value_kind in ("int", "uint"):
        return format(int(value), "x")
    if value_kind == "string":
        return str(value).encode("utf-8", errors="replace").hex()
    if value_kind == "bytes":
        return bytes(value).hex()
    raise _failure(f"only integers, byte buffers, and strings can be formatted as hex, was "
                   f"given {type_name(value)}")


_CLAUSES: dict[str, Callable[[Any, int | None], str]] = {
    "s": lambda value, precision: text_of(value),
    "d": _decimal,
    "f": _floating("f", "fixed-point"),
    "e": _floating("e", "scientific"),
    "b": _binary,
    "o": _octal,
    "x": _hexadecimal,
    "X": lambda value, precision: _hexadecimal(value, precision).upper(),
}


# callgate's bound, so that "%.999999999f" cannot ask for a gigabyte of zeros.
_MOST_DIGITS = 1000


def _unparsable(reason: str) -> CelEvaluationError:
    return CelEvaluationError(f"could not parse formatting clause: {reason}")


def format_string(template: Any, arguments: Any) -> str:
    """``"%s is %d".format(["x", 1])``: each clause takes the next argument."""
    if kind(template) != "string" or kind(arguments) != "list":
        raise no_overload("format", template, arguments)
    text, values = str(template), list(arguments)
    pieces: list[str] = []
    position, used = 0, 0
    while True:
        percent = text.find("%", position)
        if percent < 0:
            pieces.append(text[position:])
            return "".join(pieces)
        pieces.append(text[position:percent])
        position = percent + 1
        if text.startswith("%", position):
            pieces.append("%")
            position += 1
            continue
        precision: int | None = None
        if text.startswith(".", position):
            end = position + 1
            while end < len(text) and text[end].isdigit() and text[end].isascii():
                end += 1
            if end == position + 1:
                raise _unparsable("unable to convert precision specifier to integer")
            precision = int(text[position + 1:end])
            if precision > _MOST_DIGITS:
                raise _unparsable(f"precision {precision} is over callgate's limit of "
                                  f"{_MOST_DIGITS} digits")
            position = end
        if position >= len(text):
            raise _unparsable("unexpected end of format string")
        clause = _CLAUSES.get(text[position])
        if clause is None:
            raise _unparsable(f'unrecognized formatting clause "{text[position]}"')
        position += 1
        if used >= len(values):
            raise CelEvaluationError(f"index {used} out of range")
        pieces.append(clause(values[used], precision))
        used += 1
