"""CEL's failures: an expression that does not parse (or does not compile), and one that fails
when run.

Both the interface (``expression``) and the compiler raise them, so they live below both:
``expression`` → ``compiler`` → ``errors``, and nothing here imports either.
"""

from __future__ import annotations

from callgate_rules.errors import CallgateError


class CelSyntaxError(CallgateError):
    """The expression does not parse; ``line``/``column`` are 1-based within the expression;
    ``code`` names the kind of problem for a finding (``cel-syntax``)."""

    def __init__(self, message: str, line: int, column: int, code: str = "cel-syntax") -> None:
        super().__init__(message)
        self.line = line
        self.column = column
        self.code = code


class CelCompileError(CelSyntaxError):
    """The expression parses but cannot be compiled (an unknown function, a wrong number of
    arguments, a message literal); ``line``/``column`` place the offending call. A subclass
    of ``CelSyntaxError`` so that everything reporting syntax errors with their place
    reports these too; ``code`` is ``unknown-function``, ``wrong-arity`` or
    ``cel-compile``."""


class CelEvaluationError(CallgateError):
    """The expression failed at run time (missing field, no such overload, division by zero)."""


class CostExceeded(CelEvaluationError):  # noqa: N818 - says what happened, as CEL's errors do
    """The evaluation would have spent more than its budget of operations
    (``compiler.runtime.cost``): it was stopped before the loop that would have done so.
    Never absorbed by ``&&``, ``||`` or a macro, and a rule it stops fails closed whatever
    its ``on_error``: the rule could not be checked."""
