"""CEL's function library: every function callgate's CEL knows, with its typed overloads.

One table serves three readers: the compiler (a call to a function it does not inline runs
``Function.implementation``), the type checker behind ``callgate lint`` (``Overload``
signatures), and the README's table of libraries. A name not here is an unknown function,
refused when the expression is compiled, with the nearest known name as the suggestion.

Type strings in signatures: ``int``, ``uint``, ``double``, ``bool``, ``string``, ``bytes``,
``null_type``, ``timestamp``, ``duration``, ``type``, ``dyn``, ``list(T)``, ``map(K, V)``,
``optional_type(T)``, and single capital letters (``A``, ``B``, ``K``, ``V``, ``T``) as type
parameters.

Libraries: ``core`` (the CEL specification's standard functions), cel-go's extensions
(``strings``, ``lists``, ``sets``, ``math``, ``regex``, ``encoders``, ``optionals``;
``cel.bind`` and the two-variable comprehensions are macros, see ``cel.syntax.Macro``),
``kubernetes`` (Kubernetes' list, regex and URL libraries) and ``callgate`` (callgate's own
additions, documented as such).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
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


def _registry() -> dict[str, Function]:
    """Every library's functions by name; filled in as the libraries land."""
    return {}


FUNCTIONS: Mapping[str, Function] = _registry()


def lookup(name: str) -> Function | None:
    return FUNCTIONS.get(name)


def nearest(name: str) -> str | None:
    """The known function name closest to ``name`` (for "unknown function" errors)."""
    matches = difflib.get_close_matches(name, list(FUNCTIONS), n=1, cutoff=0.6)
    return matches[0] if matches else None
