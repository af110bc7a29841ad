"""``matches()`` patterns: RE2 syntax and semantics, in time linear in the text.

CEL specifies RE2, and cel-python matches with the ``re2`` module. The patterns are compiled
by ``callgate_rules.regex``, which the JSON Schema checks share: RE2 decides what a pattern
means and refuses what it cannot match in linear time (a pattern RE2 rejects is a CEL
evaluation error here, as in cel-python, and a load-time finding for a literal pattern);
a pattern that is provably linear under backtracking and means the same to Python's ``re``
is searched with ``re``, which is faster to call, and every other pattern with RE2 itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from callgate_rules.cel.errors import CelEvaluationError
from callgate_rules.regex import PatternError, Search, pattern_problem
from callgate_rules.regex import compile_pattern as compile_linear

# Re-exported: part of this module's interface (the translation is held by tests).
from callgate_rules.regex import to_python_syntax as to_python_syntax

__all__ = ["PATTERN_ARGUMENTS", "CompiledPattern", "compile_pattern", "pattern_problem",
           "to_python_syntax"]


# Functions that take a pattern, and which argument it is (the receiver of a method call
# counts as argument 0: ``s.matches(p)`` and ``matches(s, p)`` both have it at 1). A literal
# pattern there that RE2 refuses is reported at load (``CompiledExpression.refused_patterns``).
PATTERN_ARGUMENTS: dict[str, int] = {"matches": 1}


@dataclass(frozen=True)
class CompiledPattern:
    source: str
    search: Search


def compile_pattern(source: str) -> CompiledPattern:
    """Compile an RE2 pattern; raise CelEvaluationError if RE2 rejects it."""
    try:
        compiled = compile_linear(source)
    except PatternError as error:
        raise CelEvaluationError(f"invalid regular expression {source!r}: {error}") from None
    return CompiledPattern(source, compiled.search)
