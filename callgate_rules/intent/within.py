"""Whether a proposed call is within its run's intent, and if not, which parts it leaves,
in words a person confirming it reads (the draft) and the log keeps.

``Spent`` is what the run has already used of the intent: the calls of each tool and the
running totals, over its history's entries whose calls ran, one per operation.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from callgate_rules.intent.model import (
    NOT_GIVEN,
    ArgumentBound,
    RunIntent,
    ToolBound,
    Total,
    value_key,
)
from callgate_rules.masking import MASK

_MISSING = object()


@dataclass
class Spent:
    """The run's calls per tool and its totals so far (``spent_of``)."""

    calls: Counter[str] = field(default_factory=Counter)
    totals: dict[str, float] = field(default_factory=dict)


def spent_of(intent: RunIntent, entries: Iterable[Any],
             counts: Callable[[Any], bool]) -> Spent:
    """What ``entries`` (the run's history, oldest first) spent of ``intent``; ``counts``
    tells an entry that spends (``pipeline.intents.ran``)."""
    spent, operations = Spent(), set[str]()
    for entry in entries:
        if not counts(entry):
            continue
        if entry.operation_id is not None:
            if entry.operation_id in operations:
                continue
            operations.add(entry.operation_id)
        spent.calls[entry.tool] += 1
        for total in intent.totals:
            if entry.tool in total.tools:
                value = value_at(entry.arguments, total.argument)
                if _is_number(value):
                    spent.totals[total.name] = spent.totals.get(total.name, 0) + value
    return spent


def leaves(intent: RunIntent, tool: str, arguments: Mapping[str, Any],
           spent: Spent | None) -> tuple[str, ...]:
    """The parts of ``intent`` a call of ``tool`` with ``arguments`` leaves, each in words;
    empty when it is within. ``spent`` is ``None`` when the intent needs no history for
    this tool (``RunIntent.bounded_by_history``)."""
    bound = intent.tools.get(tool)
    if bound is None:
        allowed = ", ".join(sorted(intent.tools)) or "none"
        return (f"{tool} is not among the tools the user's request needs ({allowed})",)
    left = [*_call_count(bound, spent), *_argument_bounds(bound, arguments),
            *_conditions(bound, arguments)]
    left += [said for total in intent.totals if tool in total.tools
             if (said := _total(total, arguments, spent)) is not None]
    return tuple(left)


def _call_count(bound: ToolBound, spent: Spent | None) -> Iterable[str]:
    if bound.calls is None or spent is None:
        return
    made = spent.calls[bound.tool]
    if made >= bound.calls:
        allowed = "no call" if bound.calls == 0 else _times(bound.calls)
        yield (f"{bound.tool} was already called {_times(made)} in this run; the request "
               f"allows {allowed}")


def _argument_bounds(bound: ToolBound, arguments: Mapping[str, Any]) -> Iterable[str]:
    for argument in bound.arguments:
        value = value_at(arguments, argument.path)
        if value is _MISSING:
            yield f"{argument.name} is not given, and the request bounds it"
            continue
        yield from argument_leaves(argument, value)


def argument_leaves(argument: ArgumentBound, value: Any) -> Iterable[str]:
    """What of ``argument``'s bound ``value`` leaves, in words."""
    name = argument.name
    shown = _masked_shown if argument.masked else _shown  # a masked value is never written
    if argument.equals is not NOT_GIVEN and not same_value(value, argument.equals):
        yield f"{name} is {shown(value)}, the request says {shown(argument.equals)}"
    one_of, keys = argument.one_of, argument.one_of_keys
    if one_of is not None and keys is not None and value_key(value) not in keys:
        choices = ", ".join(shown(allowed) for allowed in one_of[:10])
        more = "" if len(one_of) <= 10 else f" and {len(one_of) - 10} more"
        yield f"{name} is {shown(value)}, not one of the request's {choices}{more}"
    if argument.minimum is not None or argument.maximum is not None:
        if not _is_number(value):
            yield f"{name} is {shown(value)}, not a number the request's range can hold"
        else:
            if argument.minimum is not None and value < argument.minimum:
                yield f"{name} is {shown(value)}, below the request's {shown(argument.minimum)}"
            if argument.maximum is not None and value > argument.maximum:
                yield f"{name} is {shown(value)}, above the request's {shown(argument.maximum)}"
    if argument.validator is not None and not _valid(argument.validator, value):
        yield f"{name} is {shown(value)}, which the request's schema for it does not allow"


def _valid(validator: Any, value: Any) -> bool:
    """The schema's verdict; a schema that cannot decide is no proof the value is within."""
    try:
        return bool(validator.is_valid(value))
    except Exception:  # noqa: BLE001 - any failure of the check counts as outside
        return False


def _conditions(bound: ToolBound, arguments: Mapping[str, Any]) -> Iterable[str]:
    for condition in bound.when:
        try:
            holds = condition.expression({"args": arguments}) is True
        except Exception:  # noqa: BLE001 - an error is no proof the call is within
            holds = False
        if not holds:
            yield f"the request's condition `{condition.text}` does not hold"


def _total(total: Total, arguments: Mapping[str, Any], spent: Spent | None) -> str | None:
    value = value_at(arguments, total.argument)
    if value is _MISSING:
        return None  # nothing this call adds
    argument = ".".join(total.argument)
    if not _is_number(value):
        return f"{argument} is {_shown(value)}, not a number the request's {total.name!r} adds up"
    so_far = 0 if spent is None else spent.totals.get(total.name, 0)
    if so_far + value > total.at_most:
        return (f"the run's {total.name!r} would be {_shown(so_far + value)} "
                f"({_shown(so_far)} so far and {_shown(value)} now), above the request's "
                f"{_shown(total.at_most)}")
    return None


def value_at(arguments: Any, path: tuple[str, ...]) -> Any:
    """The value at ``path`` in ``arguments``, or ``_MISSING``."""
    for part in path:
        if not isinstance(arguments, Mapping) or part not in arguments:
            return _MISSING
        arguments = arguments[part]
    return arguments


def same_value(one: Any, two: Any) -> bool:
    """JSON equality: numbers by value (100 == 100.0), never a bool for a number, lists and
    objects item by item (``value_key``, the one definition)."""
    return value_key(one) == value_key(two)


def _is_number(value: Any) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value))


def _shown(value: Any) -> str:
    if _is_number(value):
        return f"{value:,}" if isinstance(value, int) else f"{value:,.10g}"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _masked_shown(value: Any) -> str:
    return MASK


def _times(count: int) -> str:
    return {1: "once", 2: "twice"}.get(count, f"{count} times")
