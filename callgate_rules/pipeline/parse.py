"""Step 2 — PARSE: exactly one bounded call, on the allowlist, with no undeclared field.

The arguments hold JSON values only: a number JSON cannot carry (NaN, ±Infinity, a literal
beyond a double's range), in a text or in an object handed over decoded, is
``invalid_argument`` for its field before any bound sees it (every comparison with NaN is
false, so ``maximum`` and ``exclusiveMinimum`` would both let it pass).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from callgate_rules.documents.model import FLAT_AND_OPEN, Contract, InputLimits
from callgate_rules.pipeline.outcome import Rejection
from callgate_rules.pipeline.propose import (
    NonFiniteNumber,
    ProposedCall,
    read_flat_object,
    read_json,
    refuse_non_finite,
)
from callgate_rules.regex import compile_pattern
from callgate_rules.taxonomy import ErrorClass


class ParsedCall(NamedTuple):  # a tuple: made for every call, at a third of a dataclass's cost
    contract: Contract
    arguments: dict[str, Any]
    call_id: str | None
    format: str
    note: str | None = None  # e.g. "took the first of 3 calls"


# ``ParsedCall(*fields)`` is ``_new_tuple(ParsedCall, fields)`` without the Python-level
# ``__new__`` a NamedTuple has: one C call
_new_tuple = tuple.__new__


def one_call(
    calls: list[ProposedCall], contracts: Mapping[str, Contract], limits: InputLimits
) -> ParsedCall:
    count = len(calls)
    if count > limits.max_calls:
        raise Rejection(
            ErrorClass.MALFORMED,
            f"the message holds {count} calls, more than the limit of {limits.max_calls}",
            extra={"bound": "max_calls"},
        )
    note = None
    if count > 1:
        names = ", ".join(str(c.name) for c in calls)
        if limits.multiple_calls != "first":
            raise Rejection(
                ErrorClass.MALFORMED,
                f"the message holds {count} calls ({names}); policy takes none",
                agent_message=(
                    f"Your message proposed {count} tool calls ({names}); none was run. "
                    "Propose exactly one call per message."
                ),
            )
        note = f"took the first of {count} calls ({names}); the others were not run"
    name, raw, call_id, call_format = calls[0]  # a ProposedCall's fields, read at once
    if type(name) is not str and not isinstance(name, str) or not name:
        raise Rejection(ErrorClass.MALFORMED, "the call has no tool name")
    contract = contracts.get(name)
    if contract is None:
        raise Rejection(
            ErrorClass.UNKNOWN_TOOL,
            f"tool {name[:100]!r} is not on the allowlist",
            extra={"proposed_tool": name[:100]},
        )
    try:
        arguments, within = _decode_arguments(raw, limits)
        declared = contract.flat_fields
        if declared is not None and (within or _plainly_within_bounds(raw, limits)):
            # (a set's issuperset reads the dict's keys without a view of them)
            has_undeclared = declared is not FLAT_AND_OPEN and not declared.issuperset(arguments)
        else:
            has_undeclared = _check_bounds(arguments, contract.arguments_schema, limits)
    except Rejection as rejection:
        rejection.contract = contract
        raise
    except NonFiniteNumber as number:
        raise _non_finite(contract, number) from None
    if has_undeclared:
        field = ".".join(first_undeclared(arguments, contract.arguments_schema, ()) or ())
        raise Rejection(
            ErrorClass.UNEXPECTED_ARGUMENT,
            f"argument {field!r} is not declared by {contract.name} v{contract.version}",
            extra={"field": field},
            contract=contract,
        )
    return _new_tuple(ParsedCall, (contract, arguments, call_id, call_format, note))


# ``json.dumps`` with an option makes an encoder per call; one made once writes the same.
_AS_JSON = json.JSONEncoder(ensure_ascii=False).encode


def _decode_arguments(raw: Any, limits: InputLimits) -> tuple[dict[str, Any], bool]:
    """The arguments as an object, and whether they are known to be within every bound:
    read from a text as an object of plain values (``read_flat_object``), which is within
    the bounds its text is, short enough that no string breaks the length bound."""
    if raw is None:
        return {}, False
    if type(raw) is str or isinstance(raw, str):
        size = len(raw) if raw.isascii() else len(raw.encode("utf-8", "surrogatepass"))
        if not raw or raw.isspace():
            return {}, False
        if size <= limits.max_bytes:
            flat = read_flat_object(raw, "arguments are")
            if flat is not None:
                return flat, len(raw) <= limits.max_string_length and limits.max_depth > 1
            raw = read_json(raw, "arguments are", finite=True)
        else:
            raw = None
    else:
        # An object arrives already decoded (Anthropic input, a parsed message): measure it
        # as the JSON it would be, so both spellings of one call meet the same bound.
        try:
            size = len(_AS_JSON(raw).encode("utf-8", "surrogatepass"))
        except (TypeError, ValueError, RecursionError):
            raise Rejection(ErrorClass.MALFORMED, "arguments are not JSON values") from None
    if size > limits.max_bytes:
        raise Rejection(
            ErrorClass.MALFORMED,
            f"arguments are {size} bytes, more than the limit of {limits.max_bytes}",
            extra={"bound": "max_bytes"},
        )
    if not isinstance(raw, dict):
        raise Rejection(
            ErrorClass.MALFORMED,
            f"arguments must be a JSON object, not {type(raw).__name__}",
        )
    return raw, False


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _plainly_within_bounds(text: Any, limits: InputLimits) -> bool:
    """Whether the JSON text ``text`` (decoded already) is too short, plain and flat to
    break any bound: no string longer than the whole text, no lone surrogate without a
    non-ASCII character or a \\u escape, no nesting deeper than its brackets."""
    return (type(text) is str and len(text) <= limits.max_string_length and text.isascii()
            and "\\u" not in text
            and text.count("{") + text.count("[") < limits.max_depth)


def _check_bounds(value: Any, schema: Mapping[str, Any], limits: InputLimits) -> bool:
    """Depth and string length, iteratively so a hostile input cannot exhaust the stack; and
    whether some field is one a closed object schema does not declare.

    One walk does both, since it visits every value anyway: a bound broken anywhere wins
    over an undeclared field, and which undeclared field to name is worked out afterwards,
    only when there is one."""
    max_depth, max_length = limits.max_depth, limits.max_string_length
    undeclared = False
    stack: list[tuple[Any, Any, int]] = [(value, schema, 1)]
    while stack:
        item, node, depth = stack.pop()
        if depth > max_depth:
            raise _too_deep(limits)
        if isinstance(item, dict):
            properties, closed = _object_shape(node)
            leaf_too_deep = depth >= max_depth
            for key, child in item.items():
                if type(key) is not str and not isinstance(key, str):
                    raise Rejection(ErrorClass.MALFORMED, "arguments hold an object key "
                                    f"that is not a string ({type(key).__name__})")
                if len(key) > max_length or not key.isascii():
                    _check_text(key, "key", limits)
                child_node = properties.get(key)
                if child_node is None and closed and not _matches_pattern_property(key, node):
                    undeclared = True
                if type(child) is str:  # the common leaf, checked without a trip round
                    if len(child) > max_length or not child.isascii():
                        _check_text(child, "string", limits)
                elif isinstance(child, _WALKED):
                    stack.append((child, child_node, depth + 1))
                    continue
                elif isinstance(child, float) and child - child != 0.0:  # NaN or ±inf
                    refuse_non_finite(value)
                if leaf_too_deep:
                    raise _too_deep(limits)
        elif isinstance(item, list):
            stack.extend((child, None, depth + 1) for child in item)
        elif isinstance(item, str):
            _check_text(item, "string", limits)
        elif isinstance(item, float) and item - item != 0.0:
            refuse_non_finite(value)
    return undeclared


def _non_finite(contract: Contract, number: NonFiniteNumber) -> Rejection:
    """``invalid_argument`` for a number JSON cannot carry, in the words of a schema failure:
    a JSON Schema ``number`` is a JSON number, which NaN and the infinities are not."""
    if math.isnan(number.value):
        problem = "NaN is not a number"
    else:
        sign = "" if number.value > 0 else "-"
        problem = (f"{sign}Infinity is not a finite number (a number too large for a "
            "64-bit float also reads as Infinity)")
    example = (json.dumps(contract.examples[0].arguments, ensure_ascii=False)
        if contract.examples else None)
    return Rejection(
        ErrorClass.INVALID_ARGUMENT,
        f"argument {number.field!r}: {problem}",
        rule=f"{contract.name}/schema",
        agent_message=f"Argument `{number.field}` of {contract.name} is invalid: {problem}; "
                      "send a finite number.",
        hint=f"A valid call looks like: {contract.name}({example})" if example else None,
        extra={"field": number.field},
        contract=contract,
    )


_WALKED = (dict, list, str)  # what the walk descends into (a tuple: checked fastest)
_NO_PROPERTIES: Mapping[str, Any] = {}


def _object_shape(node: Any) -> tuple[Mapping[str, Any], bool]:
    """The declared properties of an object schema, and whether it is closed to others."""
    if type(node) is not dict and not isinstance(node, Mapping):
        return _NO_PROPERTIES, False
    properties = node.get("properties", _NO_PROPERTIES)
    return (properties if isinstance(properties, Mapping) else _NO_PROPERTIES,
            node.get("additionalProperties") is False)


def _too_deep(limits: InputLimits) -> Rejection:
    return Rejection(
        ErrorClass.MALFORMED,
        f"arguments are nested deeper than the limit of {limits.max_depth}",
        extra={"bound": "max_depth"},
    )


def _check_text(text: str, what: str, limits: InputLimits) -> None:
    """A string value or a key: real text (no lone surrogate), within the length bound."""
    if _LONE_SURROGATE.search(text):
        raise Rejection(ErrorClass.MALFORMED,
                        f"a {what} holds a lone UTF-16 surrogate, which is not text")
    if len(text) > limits.max_string_length:
        raise Rejection(
            ErrorClass.MALFORMED,
            f"a {what} of {len(text)} characters is longer than the limit of "
            f"{limits.max_string_length}",
            extra={"bound": "max_string_length"},
        )


def first_undeclared(
    value: Any, schema: Mapping[str, Any], path: tuple[str, ...]
) -> tuple[str, ...] | None:
    """The first field (in sorted order) that a closed object schema does not declare."""
    if not isinstance(value, dict) or not isinstance(schema, Mapping):
        return None
    properties = schema.get("properties", {})
    closed = schema.get("additionalProperties") is False
    for key in sorted(value):
        if key in properties:
            found = first_undeclared(value[key], properties[key], (*path, key))
            if found is not None:
                return found
        elif closed and not _matches_pattern_property(key, schema):
            return (*path, key)
    return None


def _matches_pattern_property(key: str, schema: Mapping[str, Any]) -> bool:
    """As the argument schema's validator has it: RE2 patterns, searched in linear time."""
    return any(compile_pattern(pattern).search(key)
               for pattern in schema.get("patternProperties", {}))
