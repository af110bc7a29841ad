"""Echoes: a tool result that holds a value only because it repeats its own call's arguments.

A bank that answers "Transaction to GB33… sent" repeats what the model asked for; the IBAN
in that answer is no evidence of where the IBAN came from. A value is an *echo* in a tool
result when the arguments of the call that result answers hold it: as a string (squashed,
as ``matching`` compares values), as a number (in any of its spellings, ``numbers``), or
— for a part of a text — by one of its canonical spellings (``text_values``). Such an
occurrence is not a source, in ``provenance`` and in ``origins`` alike: the value keeps
the sources it has elsewhere, which are those of the arguments it repeats.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from functools import lru_cache
from typing import Any

from callgate_rules.provenance.matching import fold, squash
from callgate_rules.provenance.numbers import as_decimal, numbers_in
from callgate_rules.provenance.text_values import parts_of


class CallArguments:
    """The arguments of one call (its JSON text), as values in its result are compared."""

    __slots__ = ("text", "squashed", "_numbers", "_parts")

    def __init__(self, text: str) -> None:
        self.text = text
        self.squashed = squash(text)
        self._numbers: set[Decimal] | None = None
        self._parts: set[str] | None = None

    def repeat(self, value: Any, keys: Sequence[str] = ()) -> bool:
        """Whether these arguments hold ``value`` (or, for a part, one of its ``keys``)."""
        if isinstance(value, str) and value and squash(value) in self.squashed:
            return True
        if isinstance(value, int | float) and not isinstance(value, bool):
            if self._numbers is None:
                self._numbers = numbers_in(fold(self.text))
            return as_decimal(value) in self._numbers
        if not keys:
            return False
        if self._parts is None:
            self._parts = {key for part in parts_of(self.text) for key in part.canonical}
        return any(key in self._parts for key in keys)


@lru_cache(maxsize=4096)
def call_arguments(text: str) -> CallArguments:
    """``CallArguments`` of a call's argument text, made once for every proposal of a run."""
    return CallArguments(text)
