"""The link between an executed write's receipt and its decision's log line, both ways.

The gate writes a decision's line once the decision has ended; for the decision that
executed a write (``executed_write``), the write's receipt then keeps the line's hash
(``Receipt.log_line``, ``decision_log.line_hash``), and the line names the receipt's
``operation_id``. ``check_receipts`` (``callgate log verify --store``) holds the two against
each other: every executed write's line must be the one its receipt names, and every
receipt that names a line should find it in the files given.

What each finding means:

- a receipt naming *another* line: the line was edited or replaced after the receipt was
  linked (or the receipt was) — a break, named by file and line;
- a receipt naming a line *not in the files*: a line dropped, or a log file not given (each
  instance of a fleet writes its own log; pass them all) — noted with the receipts' IDs;
- a line whose receipt is *gone*: purged by retention — noted;
- a receipt that names *no* line: written before receipts kept it, without a decision log,
  or the store failed the link (counted by the gate as ``log_line_not_linked``) — noted.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from callgate_rules.decision_log import line_hash
from callgate_rules.store.base import ReceiptState, ReceiptStore
from callgate_rules.taxonomy import Route

RECEIPTS_READ = 1_000_000  # succeeded receipts read for the way back; more are noted
SHOWN = 5  # operation IDs named in a note


def executed_write(route: object, error_class: object, operation_id: object) -> bool:
    """Whether a decision (its route, error class and operation ID) executed a write: it
    ended ``return_result`` without an error class, under an operation ID (a read has none;
    a receipt returned again is ``return_receipt``)."""
    return operation_id is not None and error_class is None and route == Route.RETURN_RESULT


@dataclass(frozen=True)
class ReceiptCheck:
    """What ``check_receipts`` found: lines of executed writes whose receipt names them,
    the first break (None when none), and what could not be checked."""

    linked: int
    broken: str | None
    notes: tuple[str, ...] = ()


def check_receipts(paths: Iterable[Path], store: ReceiptStore) -> ReceiptCheck:
    """Hold the executed writes' lines in the log files ``paths`` against their receipts
    in ``store`` (see the module's docstring)."""
    hashes: set[str] = set()
    linked = 0
    gone: list[str] = []
    unlinked: list[str] = []
    for place, text, record in _lines(paths):
        hashes.add(line_hash(text))
        if not executed_write(record.get("route"), record.get("error_class"),
                              record.get("operation_id")):
            continue
        operation_id = str(record["operation_id"])
        receipt = store.get(operation_id)
        if receipt is None:
            gone.append(operation_id)
        elif receipt.log_line is None:
            unlinked.append(operation_id)
        elif receipt.log_line != line_hash(text):
            return ReceiptCheck(linked, (
                f"{place}: the receipt of {operation_id} names another line "
                f"({receipt.log_line}): this line was edited or replaced after its write "
                "ran, or the receipt was"))
        else:
            linked += 1
    receipts = store.list_receipts(state=ReceiptState.SUCCEEDED, limit=RECEIPTS_READ)
    elsewhere = [r.operation_id for r in receipts
                 if r.log_line is not None and r.log_line not in hashes]
    notes = [note for note in (
        _note(elsewhere, "receipt(s) name a line that is not in these files (a line "
              "dropped, or the log of another instance or a rotated file not given)"),
        _note(gone, "executed write(s) whose receipt is not in the store (purged?)"),
        _note(unlinked, "receipt(s) of executed writes name no line (written before "
              "receipts kept it, or the store failed the link)"),
    ) if note]
    if len(receipts) == RECEIPTS_READ:
        notes.append(f"only the oldest {RECEIPTS_READ} succeeded receipts were read for "
                     "the receipts → lines check")
    return ReceiptCheck(linked, None, tuple(notes))


def _note(operation_ids: list[str], what: str) -> str | None:
    if not operation_ids:
        return None
    shown = ", ".join(operation_ids[:SHOWN]) + (", ..." if len(operation_ids) > SHOWN else "")
    return f"{len(operation_ids)} {what}: {shown}"


def _lines(paths: Iterable[Path]) -> Iterable[tuple[str, str, Mapping[str, Any]]]:
    """(file:line, the line's text, its record) for every JSON object line."""
    for path in paths:
        with path.open(encoding="utf-8", errors="surrogateescape", newline="") as file:
            for number, line in enumerate(file, start=1):
                text = line.rstrip("\n")
                try:
                    record = json.loads(text)
                except ValueError:
                    continue  # the chain check names it
                if isinstance(record, dict):
                    yield f"{path}:{number}", text, record
