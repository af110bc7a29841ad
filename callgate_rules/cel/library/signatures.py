"""The shapes of the function library: ``Overload`` (one typed signature) and ``Function``
(a name, its overloads and its implementation), plus the shorthands the library modules
declare their functions with. Kept apart from the package's ``__init__`` so that every
library module can import them while ``__init__`` imports every library module.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Overload:
    """One signature. For a member overload (``receiver.name(args)``) the receiver's type
    is ``parameters[0]``."""

    overload_id: str  # cel-go's id where it has one, e.g. "string_split_string"
    member: bool
    parameters: tuple[str, ...]
    result: str


@dataclass(frozen=True)
class Function:
    """A function by the name an expression writes (``split``, ``math.greatest``)."""

    name: str
    library: str
    overloads: tuple[Overload, ...]
    # Called with the evaluated arguments, the receiver first for a member call, in the
    # runtime representation (``cel.values`` and plain Python); dispatches on the arguments'
    # kinds itself; raises CelEvaluationError when CEL has no answer ("no such overload").
    implementation: Callable[..., Any]
    doc: str  # one line: the README's table and lint's explanations
    variadic: bool = False  # math.greatest(a, b, c, ...): the last parameter repeats

    def arities(self) -> frozenset[tuple[bool, int]]:
        """(member, number of arguments besides the receiver) for every overload."""
        return frozenset(
            (overload.member, len(overload.parameters) - (1 if overload.member else 0))
            for overload in self.overloads)


def member(overload_id: str, *types: str) -> Overload:
    """A member overload: ``member("string_trim", "string", "string")`` is
    ``string.trim() -> string`` (the receiver first, the result last)."""
    return Overload(overload_id, True, types[:-1], types[-1])


def global_(overload_id: str, *types: str) -> Overload:
    """A global overload: ``global_("strings_quote", "string", "string")`` is
    ``strings.quote(string) -> string`` (the result last)."""
    return Overload(overload_id, False, types[:-1], types[-1])
