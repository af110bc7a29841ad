"""Computed numbers: a number argument written nowhere that equals the sum, the difference
or the product of two numbers the conversation holds (``origins.X.derived``).

A new rent of 1,200 computed from "1,100" and "+100" in a notice the user named is written
nowhere, so ``origins`` found no source for it. ``Operands`` are the numbers the
conversation holds, as ``text_values`` reads them (number parts: at least three significant
digits, outside dates, IBANs and links), the first ``MAX_OPERANDS`` distinct ones in the
order of the pieces that hold them first; ``derivations`` finds every pair of them that
gives the value, exactly (``Decimal``: 0.1 + 0.2 is 0.3).

The search is bounded and linear, in exact integer arithmetic (every operand scaled by the
same power of ten): for each operand ``a`` one subtraction and one look-up for a sum
(``value - a``), one for a difference (``a - value``) and one division with its remainder
for a product (``value / a``), so at most 3 × ``MAX_OPERANDS`` operations per value,
whatever the conversation holds. What is left out:
numbers past the first ``MAX_OPERANDS`` (a conversation flooded with numbers pushes later
ones out: the value is then not derived, and a rule that asks for ``derived`` holds it),
numbers of one or two significant digits (``12 × 100`` is not derived: small numbers are
everywhere, and a value near any number would be "computed"), computations of more than
two numbers, and quotients.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

MAX_OPERANDS = 256  # distinct numbers of a conversation a value may be computed from
SUM, DIFFERENCE, PRODUCT = "sum", "difference", "product"
_SYMBOLS = {SUM: "+", DIFFERENCE: "-", PRODUCT: "×"}
_NUMBER = "number:"


def plain(number: Decimal) -> str:
    """A number as a person writes it: ``1100``, ``0.5``, never ``1.1E+3``."""
    return format(number.normalize(), "f")


@dataclass(frozen=True)
class Derivation:
    """``value = first OPERATION second``, each operand with its ``number:`` key (of a sum
    or a product, the larger first)."""

    operation: str
    value: Decimal
    first: Decimal
    second: Decimal
    first_key: str
    second_key: str
    earlier: int = 0  # the place of its earlier operand among the operands

    @property
    def text(self) -> str:
        """``1200 = 1100 + 100``."""
        return (f"{plain(self.value)} = {plain(self.first)} {_SYMBOLS[self.operation]} "
                f"{plain(self.second)}")


def _scaled(number: Decimal, places: int) -> int | None:
    """``number × 10^places`` as an integer, exactly; None when it is not one."""
    sign, digits, exponent = number.as_tuple()
    assert isinstance(exponent, int)  # finite numbers only
    whole, shift = int("".join(map(str, digits))), exponent + places
    if shift < 0:  # 1200.0 at no decimals is 1200; 1200.5 is no integer
        whole, rest = divmod(whole, 10 ** -shift)
        if rest:
            return None
    else:
        factor: int = 10 ** shift
        whole *= factor
    return -whole if sign else whole


class Operands:
    """The numbers a value may be computed from: the first ``MAX_OPERANDS`` distinct
    ``number:`` keys of ``keys`` (in the order given: by first position), each as an
    integer of one common scale (``places``: the most decimals any of them has), so that
    the search is exact integer arithmetic."""

    def __init__(self, keys: Iterable[str], limit: int = MAX_OPERANDS) -> None:
        self.numbers: list[Decimal] = []
        self.keys: list[str] = []
        seen: set[Decimal] = set()  # equal numbers hash alike: 1100 is 1.1E+3
        for key in keys:
            if len(self.numbers) >= limit:
                break
            if not key.startswith(_NUMBER):
                continue
            try:
                number = Decimal(key.removeprefix(_NUMBER))
            except InvalidOperation:
                continue
            if number.is_finite() and number not in seen:
                seen.add(number)
                self.numbers.append(number)
                self.keys.append(key)
        # the keys are written without trailing zeros (``text_values``): their exponents
        # say how many decimals each has
        self.places = max([0, *(-int(n.as_tuple().exponent) for n in self.numbers)])
        self.scaled = [_scaled(number, self.places) or 0 for number in self.numbers]
        self.order = {scaled: at for at, scaled in enumerate(self.scaled)}

    def derivations(self, value: Decimal) -> list[Derivation]:
        """Every pair of operands that gives ``value`` by a sum, a difference or a
        product, exactly; a sum and a product once per pair, an operand may be used twice
        (600 + 600). In the order of the earlier operand of each pair."""
        if not value.is_finite() or not self.numbers:
            return []
        order, found = self.order, []
        # a sum or a difference at the operands' scale; a product at twice that scale
        total, product = _scaled(value, self.places), _scaled(value, 2 * self.places)
        for at, first in enumerate(self.scaled):
            if total is not None:
                other = order.get(total - first)
                if other is not None and other >= at:  # once per pair
                    found.append(self._way(SUM, value, at, other))
                other = order.get(first - total)
                if other is not None:
                    found.append(self._way(DIFFERENCE, value, at, other))
            if product is not None and first and product % first == 0:
                other = order.get(product // first)
                if other is not None and other >= at:
                    found.append(self._way(PRODUCT, value, at, other))
        found.sort(key=lambda way: way.earlier)
        return found

    def _way(self, operation: str, value: Decimal, at: int, other: int) -> Derivation:
        pair = [(self.numbers[at], self.keys[at]), (self.numbers[other], self.keys[other])]
        if operation != DIFFERENCE:  # as a person writes it: the larger first
            pair.sort(key=lambda operand: abs(operand[0]), reverse=True)
        (first, first_key), (second, second_key) = pair
        return Derivation(operation, value, first, second, first_key, second_key,
                          min(at, other))
