"""Step 6 — RECONCILE: when the outcome is unknown, ask the destination; never write blind.

``key``: the destination deduplicates by operation ID, so when it has no record a retry
with the *same* ID is safe. ``lookup``: it can be asked, but not deduplicate, so "not found
yet" may still be a late confirmation: ask again within the retry budget, then hand over.
``none``: it cannot be asked at all: a person decides.

``reconcile.match`` reads ``found`` as ``answers.readable`` has it (an MCP answer's data).

The finder is held to the contract's timeout as a resolver is (``lookups.find``): one that
hangs is abandoned at the deadline, its late answer dropped, and the verdict is
``Undecidable``. What a finder raises stays in ``detail`` (the receipt and the log); a
person is told ``said``, the gate's own words.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from callgate_rules.cel.errors import CelEvaluationError
from callgate_rules.documents.model import Contract, Idempotency
from callgate_rules.pipeline import lookups
from callgate_rules.pipeline.answers import readable
from callgate_rules.pipeline.execute import Finder


@dataclass(frozen=True)
class Confirmed:
    """The destination has the operation and it matches the call: a late confirmation."""

    result: Any


@dataclass(frozen=True)
class Absent:
    """The destination has no record of the operation (yet)."""

    resend_is_safe: bool  # True when the destination deduplicates by operation ID


@dataclass(frozen=True)
class Mismatch:
    """The destination has something under this ID that does not match the call:
    ``detail`` for the log, ``said`` for a person (in the gate's own words, never what the
    destination holds)."""

    found: Any
    detail: str
    said: str = ("what the destination holds under this operation ID does not match the "
                 "call; check it there")


@dataclass(frozen=True)
class Undecidable:
    """The destination cannot be asked (idempotency ``none``, no finder bound), or did not
    answer: ``detail`` for the log, ``said`` for a person (``detail`` when it is the gate's
    own words)."""

    detail: str
    said: str = ""

    def __post_init__(self) -> None:
        if not self.said:
            object.__setattr__(self, "said", self.detail)


Verdict = Confirmed | Absent | Mismatch | Undecidable


def reconcile(contract: Contract, finder: Finder | None, operation_id: str,
              variables: Mapping[str, Any], timeout: float | None = None) -> Verdict:
    """Ask ``finder`` about ``operation_id``, within ``timeout`` seconds (by default the
    contract's timeout), and compare what it holds with the call."""
    if contract.idempotency == Idempotency.NONE:
        return Undecidable(f"{contract.name} declares idempotency none: the destination can "
                           "neither deduplicate nor be asked")
    if finder is None:
        return Undecidable(f"no finder is bound for {contract.name}; bind one with "
                           "Gate(finder=...) to reconcile")
    seconds = contract.timeout_seconds if timeout is None else timeout
    try:
        found = lookups.find(finder, contract.name, operation_id, seconds)
    except lookups.LookupLate as late:
        return Undecidable(f"the look-up by operation ID was given up: {late}",
                           "the destination did not say in time whether it happened")
    except Exception as error:  # noqa: BLE001 - a failed look-up decides nothing
        return Undecidable(f"the look-up by operation ID failed: {type(error).__name__}: "
                           f"{str(error)[:300]}",
                           "the destination could not be asked whether it happened")
    if found is None:
        return Absent(resend_is_safe=contract.idempotency == Idempotency.KEY)
    if contract.reconcile_match is not None:
        try:
            matches = contract.reconcile_match(
                {**variables, "found": readable(found)}) is True
        except CelEvaluationError as error:
            return Mismatch(found, f"reconcile.match failed to evaluate: {error}",
                            "the destination's record under this operation ID could not be "
                            "compared with the call; check it there")
        if not matches:
            return Mismatch(found, "what the destination holds under this operation ID does "
                                   "not match the call's arguments")
    return Confirmed(found)
