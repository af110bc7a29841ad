"""The run-time cost budget of one evaluation: counted operations, not wall time.

A compiled expression that holds a comprehension (``all``, ``exists``, ``exists_one``,
``map``, ``filter``, ``sortBy``, the two-variable forms) or calls a list function of the
library starts a fresh budget when it is
evaluated (``start_metering``) and charges each loop before it runs: the number of elements
times the operations of one pass of the loop's body (``metered_range``). A nested loop
charges itself each time its outer loop reaches it, so what is charged is the whole work of
the evaluation, loop by loop. An expression without a loop is never metered: it runs in
time proportional to its own size over inputs the parse step has already bounded.

The same evaluation also charges, at the time of the call, every function whose work grows
with the size of a value (``scanned``, ``metered_equals``, ``metered_in``): ``sort``
(n·log₂n), ``distinct``, ``join``, ``in`` on a list, ``==`` between lists or maps and the
other list and set functions one per element (and per element of the lists and maps nested
in it), ``contains``, ``matches``, ``split`` and the other string scans a tenth per code
point (cel-go's traversal factor). The names come from ``callgate_rules.cel.cost``'s tables
(``LIST_SCANS``, ``STRING_SCANS``), so the estimate and the meter price the same calls.
Only code generated for an expression that starts metering calls these: one with a loop,
or one that calls a list function of the library (``sort``, ``distinct``...: Python-level
comparisons). Any other expression calls each function at most once per node and each of
those scans once, linearly, at C speed or close, over inputs the parse step bounded, so it
is left unmetered (and as fast as it was): see ``codegen._metered``.

A loop or call whose charge would take the evaluation past its budget does not start: it raises
``CostExceeded``, a ``CelEvaluationError`` that no ``&&``, ``||`` or macro absorbs (the
generated code re-raises it before absorbing other errors), so the rule fails closed as one
that could not be checked. So the operations an evaluation performs in its loops never
exceed the budget.

The unit is the one ``callgate_rules.cel.cost`` estimates in at load: one per expression
node, a loop multiplying its body by the size of its range (cel-go's and Kubernetes'
model, where one unit is roughly 50 ns of their interpreter). The budget is per evaluation
of one expression, as Kubernetes' per-call limit; a decision evaluates a bounded number of
expressions, which its documents fix.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from callgate_rules.cel.compiler.runtime.compare import equals, is_in
from callgate_rules.cel.compiler.runtime.containers import iteration_pairs, iteration_range
from callgate_rules.cel.errors import CostExceeded

__all__ = ["RUNTIME_BUDGET", "CostExceeded", "budget", "metered_equals", "metered_in",
           "metered_not_equals", "metered_pairs", "metered_range", "scanned", "scanned_sort",
           "spent", "start_metering"]

# Operations one evaluation may spend in its loops and scans: Kubernetes' per-call limit
# (k8s.io/apiserver/pkg/apis/cel PerCallLimit); here 0.1 s (loops) to 0.9 s (``distinct``
# of texts, the slowest per operation measured).
RUNTIME_BUDGET = 1_000_000


class _Meter(threading.local):
    """This thread's budget: what the evaluation under way may still spend."""

    def __init__(self) -> None:
        self.budget = RUNTIME_BUDGET  # what the next evaluation starts with
        self.started = RUNTIME_BUDGET  # what the one under way started with
        self.left = RUNTIME_BUDGET


METER = _Meter()


def start_metering() -> None:
    """A fresh budget for the evaluation that begins (called first by every compiled
    expression that holds a loop)."""
    METER.left = METER.started = METER.budget


def _charge(count: int, per_element: int, what: str = "a comprehension") -> None:
    left = METER.left - count * per_element
    if left < 0:
        budget = METER.started
        METER.left = 0  # spent: nothing after this may run, absorbed or not
        raise CostExceeded(
            f"cost budget exceeded: {what} over {count:,} elements needs "
            f"{count * per_element:,} more operations, past this evaluation's budget of "
            f"{budget:,} operations")
    METER.left = left


_AGGREGATES = (list, tuple, dict)


def _charge_aggregate(value: list[Any] | tuple[Any, ...] | dict[Any, Any], what: str) -> None:
    """One per element of ``value`` and of every list or map nested in it (what comparing
    or scanning it may visit). Each level is charged before its elements are looked at, so
    the walk itself never does more than it has charged."""
    pending = [value]
    while pending:
        current = pending.pop()
        _charge(len(current), 1, what)
        elements = current.values() if type(current) is dict else current
        pending += [element for element in elements if isinstance(element, _AGGREGATES)]


def scanned(value: Any) -> Any:
    """``value``, once what scanning it costs is charged: a tenth per code point of a
    string or byte of bytes (rounded up), one per element of a list or map (nested ones
    included); nothing for a scalar."""
    value_type = type(value)
    if value_type is str or value_type is bytes:
        if len(value) > 10:
            _charge(-(-len(value) // 10), 1, "a string scan")
    elif isinstance(value, _AGGREGATES):
        _charge_aggregate(value, "a list function")
    return value


def scanned_sort(value: Any) -> Any:
    """``value``, once sorting it is charged: n·⌈log₂n⌉ for a list of n elements (as the
    estimate prices ``sort``), with what its nested lists and maps add."""
    if isinstance(value, _AGGREGATES):
        count = len(value)
        _charge(count, max(1, math.ceil(math.log2(max(count, 2)))) - 1, "sort")
        _charge_aggregate(value, "sort")
    return value


def metered_equals(left: Any, right: Any) -> bool:
    """``==`` charged by what it may compare: two lists or maps of one length cost the
    elements of one of them (nested ones included); of different lengths they are unequal
    at once."""
    if (isinstance(left, _AGGREGATES) and isinstance(right, _AGGREGATES)
            and len(left) == len(right)):
        _charge_aggregate(left, "a comparison")
    return equals(left, right)


def metered_not_equals(left: Any, right: Any) -> bool:
    return not metered_equals(left, right)


def metered_in(item: Any, container: Any) -> bool:
    """``in`` charged by what it may compare: every element of a list (and what is nested
    in it); a map is looked up by hash, except by a key that is not a string (each key)."""
    if type(container) is dict:
        if type(item) is not str:  # found by comparing it with each key
            _charge(len(container), 1, "in")
    elif isinstance(container, _AGGREGATES):
        _charge_aggregate(container, "in")
    return is_in(item, container)


def metered_range(value: Any, per_element: int) -> Iterable[Any]:
    """What a one-variable macro iterates (``iteration_range``), charged first."""
    elements = iteration_range(value)
    _charge(len(elements), per_element)  # type: ignore[arg-type]
    return elements


def metered_pairs(value: Any, per_element: int) -> Iterable[tuple[Any, Any]]:
    """What a two-variable macro iterates (``iteration_pairs``), charged first."""
    pairs = iteration_pairs(value)
    _charge(len(value), per_element)  # iteration_pairs accepted it: a list or a map
    return pairs


def spent() -> int:
    """Operations charged by the evaluation last begun on this thread."""
    return METER.started - METER.left


@contextmanager
def budget(operations: int) -> Iterator[None]:
    """Evaluations on this thread get ``operations`` as their budget while inside (tests,
    and a host that wants a tighter bound than ``RUNTIME_BUDGET``)."""
    before = METER.budget
    METER.budget = operations
    try:
        yield
    finally:
        METER.budget = before

