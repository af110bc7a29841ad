"""CEL's function library: every function callgate's CEL knows, with its typed overloads.

One table serves three readers: the compiler (a call to a function it does not inline runs
``Function.implementation``), the type checker behind ``callgate lint`` (``Overload``
signatures), and the README's table of libraries. A name not here is an unknown function,
refused when the expression is compiled, with the nearest known name as the suggestion.

Type strings in signatures: ``int``, ``uint``, ``double``, ``bool``, ``string``, ``bytes``,
``null_type``, ``timestamp``, ``duration``, ``type``, ``dyn``, ``list(T)``, ``map(K, V)``,
``optional_type(T)``, ``type(T)`` (the type of a type value: ``type(1)`` is ``type(int)``),
``kubernetes.URL`` (Kubernetes' URL values, ``cel.values.URL``), ``net.IP`` and
``net.CIDR`` (``cel.values.IP``, ``CIDR``), and single capital letters
(``A``, ``B``, ``K``, ``V``, ``T``) as type parameters.

Libraries: ``core`` (the CEL specification's standard functions and operators, by cel-go's
names: ``_+_``, ``_==_``, ``@in``...), cel-go's extensions (``strings``, ``lists``,
``sets``, ``math``, ``regex``, ``encoders``, ``optionals``; ``cel.bind``, ``sortBy`` and the
two-variable comprehensions are macros, see ``cel.syntax.Macro``), ``kubernetes``
(Kubernetes' list, regex and URL libraries) and ``callgate`` (callgate's own additions,
documented as such).

Where two libraries give one name (``indexOf`` on strings in cel-go's strings library, on
lists in Kubernetes'), the later library's ``Function`` carries the overloads of both and
replaces the earlier one; ``_registry`` checks that nothing is lost that way.

Imports: every library module imports the compiler's runtime
(``callgate_rules.cel.compiler.runtime``), whose functions are the implementations of the
core. So the compiler package must not import this package at module level in a module its
``__init__`` reaches (that would be a cycle through ``callgate_rules.cel.compiler``); it
receives ``FUNCTIONS`` from its caller, or looks it up from ``cel.expression``.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping

from callgate_rules.cel.library import (
    core,
    encoders,
    kubernetes,
    lists,
    math,
    network,
    optionals,
    regex,
    sets,
    strings,
)
from callgate_rules.cel.library.signatures import Function, Overload

__all__ = ["FUNCTIONS", "Function", "Overload", "lookup", "nearest"]

# In registration order: a later library may extend an earlier one's function.
_LIBRARIES = (core, strings, lists, sets, math, regex, encoders, optionals, kubernetes,
              network)


def _registry() -> dict[str, Function]:
    """Every library's functions by name."""
    registry: dict[str, Function] = {}
    for library in _LIBRARIES:
        for function in library.FUNCTIONS:
            earlier = registry.get(function.name)
            if earlier is not None and not set(earlier.overloads) <= set(function.overloads):
                raise ValueError(f"{function.name} of {function.library} would drop "
                                 f"overloads of {earlier.library}")
            registry[function.name] = function
    return registry


FUNCTIONS: Mapping[str, Function] = _registry()


def lookup(name: str) -> Function | None:
    return FUNCTIONS.get(name)


def nearest(name: str) -> str | None:
    """The known function name closest to ``name`` (for "unknown function" errors)."""
    matches = difflib.get_close_matches(name, list(FUNCTIONS), n=1, cutoff=0.6)
    return matches[0] if matches else None
