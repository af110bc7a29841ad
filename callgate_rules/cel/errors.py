"""CEL's two failures: an expression that does not parse, and one that fails when run.

Both the interface (``expression``) and the compiler raise them, so they live below both:
``expression`` → ``compiler`` → ``errors``, and nothing here imports either.
"""

from __future__ import annotations

from callgate_rules.errors import CallgateError


class CelSyntaxError(CallgateError):
    """The expression does not parse; ``line``/``column`` are 1-based within the expression."""

    def __init__(self, message: str, line: int, column: int) -> None:
        super().__init__(message)
        self.line = line
        self.column = column


class CelEvaluationError(CallgateError):
    """The expression failed at run time (missing field, no such overload, division by zero)."""
