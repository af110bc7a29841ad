"""A run whose budgets hold across requests and processes: the ``Run`` of ``route.py``,
rebuilt from the run's history in the store (``store.history``) before each decision.

A host that is not one long-lived Python process (the decision service's hosts, one HTTP
request per proposal, several server instances behind a balancer) cannot keep a ``Run``
object between proposals. It names the run instead (``run_id``), and every proposal of that
run is an entry of its history, kept beside the receipts, so every instance on the same
store rebuilds the same run:

    started_at              the first entry's time (the run deadline runs from there)
    calls per tool          entries that went on (to execution or a person), one per
                            operation: the same write decided, then claimed, counts once
    regenerations in a row  the entries asking for a corrected call since the last one
                            that went on
    failures                entries whose error class is a failure, among them a write's
                            failed ending (recorded when it ends)

``Run.admit`` then judges the new proposal exactly as ``Gate.handle`` does in-process. Two
proposals of one run decided at the same instant on two instances may both be admitted
against the same count (the check and the entry are not one transaction): the per-run
limits are a budget against runaway agents, not an exactly-once guarantee — the receipts
are that.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from callgate_rules.pipeline.route import Run
from callgate_rules.store.history import HistoryEntry
from callgate_rules.taxonomy import FAILURES, ErrorClass, Route

WENT_ON = frozenset({str(Route.EXECUTE), str(Route.AWAIT_CONFIRMATION),
                     str(Route.RETURN_RESULT), str(Route.RETURN_RECEIPT)})
ALLOWED = frozenset({None, str(ErrorClass.CONFIRMATION_REQUIRED)})
FAILED = frozenset(str(error_class) for error_class in FAILURES)


def run_from_history(run_id: str, entries: Sequence[HistoryEntry], now: datetime) -> Run:
    """The run as its history (oldest first) tells it; a new run starts ``now``."""
    run = Run(started_at=entries[0].at if entries else now, run_id=run_id)
    operations: set[str] = set()
    for entry in entries:
        if entry.route == str(Route.REGENERATE):
            run.regenerations_in_a_row += 1
        elif entry.route in WENT_ON and entry.error_class in ALLOWED:
            run.regenerations_in_a_row = 0
            if entry.operation_id is None or entry.operation_id not in operations:
                run.calls[entry.tool] += 1
            if entry.operation_id is not None:
                operations.add(entry.operation_id)
        if entry.error_class in FAILED:
            run.failures += 1
    return run
