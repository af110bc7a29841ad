"""A run whose budgets hold across requests and processes: the ``Run`` of ``budgets.py``,
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

What is exact is a rule over ``history`` decided by ``Gate.handle`` or ``Gate.confirm``:
``RunHold`` holds the run's lease (``store.history``'s ``take_run_lease``) from the read
of the history through the decision, the execution and the entry's write (``history_of``
reads it so), so two instances deciding one
run's calls take turns. A proposal that cannot get the lease within ``RunHold``'s wait is
``transient`` (its route says try again), never decided on a history that may be missing
a call in flight, and never left hanging.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

from callgate_rules.documents.model import Contract, GateConfig
from callgate_rules.errors import StoreError
from callgate_rules.pipeline.approvals import RUN_APPROVALS, approvals_of, declares_covering
from callgate_rules.pipeline.budgets import Run, seconds
from callgate_rules.pipeline.history import run_history_now, variable
from callgate_rules.pipeline.outcome import Rejection
from callgate_rules.store.history import HistoryEntry, RunHistory
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


# The first wait between two tries at a lease held elsewhere, and the longest: a decision
# holds it for milliseconds when the destination answers at once.
FIRST_BACKOFF_SECONDS = 0.002
LONGEST_BACKOFF_SECONDS = 0.1
_holds = itertools.count()  # makes each hold's holder unique within a gate's worker


class LeaseHost(Protocol):
    """What a run's lease and history are read through: the ``Gate``."""

    @property
    def histories(self) -> RunHistory: ...
    @property
    def config(self) -> GateConfig: ...
    @property
    def worker(self) -> str: ...
    @property
    def run_lease_wait(self) -> timedelta: ...
    @property
    def history_retention(self) -> timedelta: ...
    @property
    def clock(self) -> Callable[[], datetime]: ...
    @property
    def sleep(self) -> Callable[[float], None]: ...
    @property
    def rng(self) -> random.Random: ...

    def count(self, counter: str) -> None: ...


class RunHold:
    """One decision's hold on its run's lease: ``take`` (waiting with backoff, within the
    gate's ``run_lease_wait``), then ``release`` once the decision's entry is written. A
    lease lasts the receipts' lease (``spec.receipts.lease``): a holder that dies leaves it
    that long at most. Made for every proposal of a named run, it costs nothing until a
    tool whose rules read ``history`` takes it; for no run (``None``: a run no other
    instance can know) it takes nothing. ``with hold:`` releases it at the end."""

    __slots__ = ("host", "run_id", "holder")

    def __init__(self, host: LeaseHost, run_id: str | None) -> None:
        self.host, self.run_id = host, run_id
        self.holder: str | None = None  # while the lease is held

    def __enter__(self) -> RunHold:
        return self

    def __exit__(self, kind: object, error: object, traceback: object) -> None:
        if self.holder is not None:  # most holds take nothing: no call to release
            self.release()

    def take(self) -> bool:
        """Whether the lease was had within the wait. Bounded twice: by the time that
        passed and by the sleeps asked for, so a fake clock or sleep cannot make it spin
        forever. A store error is raised as it is (the caller fails closed)."""
        if self.run_id is None:
            return True
        host = self.host
        leases, holder = host.histories, f"{host.worker}:{next(_holds)}"
        lease = seconds(host.config.routing.lease_seconds)
        wait = host.run_lease_wait.total_seconds()
        give_up, slept, backoff = time.monotonic() + wait, 0.0, FIRST_BACKOFF_SECONDS
        while True:
            now = host.clock()
            if leases.take_run_lease(self.run_id, holder=holder, expires_at=now + lease,
                                     now=now):
                self.holder = holder
                return True
            left = min(give_up - time.monotonic(), wait - slept)
            if left <= 0:
                return False
            pause = min(backoff * (0.5 + host.rng.random()), left)  # jittered
            host.sleep(pause)
            slept += pause
            backoff = min(backoff * 2, LONGEST_BACKOFF_SECONDS)

    def release(self) -> None:
        """Give the lease back if it was taken. Counted as ``run_lease_lost`` when it had
        been taken over (held past its expiry) or the store failed (it then expires)."""
        holder, self.holder = self.holder, None
        if holder is None or self.run_id is None:
            return
        try:
            released = self.host.histories.release_run_lease(self.run_id, holder=holder)
        except StoreError:
            released = False
        if not released:
            self.host.count("run_lease_lost")


def read_run(host: LeaseHost, contract: Contract, run: Run | None,
             history: Sequence[HistoryEntry] | None, now: datetime, *, hold: RunHold | None,
             variables: dict[str, Any]) -> None:
    """Set ``history`` in a decision's ``variables`` (``history_of``), and the run's
    approvals (``approvals.RUN_APPROVALS``) when a question of ``contract`` declares
    ``approval_covers``: both read from the same entries."""
    entries, variables["history"] = read_history(host, contract, run, history, now, hold)
    if declares_covering(contract):
        variables[RUN_APPROVALS] = approvals_of(entries)


def history_of(host: LeaseHost, contract: Contract, run: Run | None,
               history: Sequence[HistoryEntry] | None, now: datetime,
               hold: RunHold | None = None) -> list[Any]:
    """The value of ``history`` (``run_entries``, as the rules see them)."""
    return read_history(host, contract, run, history, now, hold)[1]


def run_entries(host: LeaseHost, contract: Contract, run: Run | None,
                history: Sequence[HistoryEntry] | None, now: datetime,
                hold: RunHold | None = None) -> Sequence[HistoryEntry]:
    """The run's history: the host's, else the run's from the store (empty for a new
    run), read holding the run's lease when ``hold`` is given. A history that cannot be
    read, or a lease held elsewhere past the wait, is ``transient``: rules over the run
    never decide on a guess."""
    return read_history(host, contract, run, history, now, hold)[0]


def read_history(host: LeaseHost, contract: Contract, run: Run | None,
                 history: Sequence[HistoryEntry] | None, now: datetime,
                 hold: RunHold | None = None) -> tuple[Sequence[HistoryEntry], list[Any]]:
    """``run_entries``, and the value of ``history`` made of them: read through this
    process's view of the run (``pipeline.history.RunViews``), which asks the store only
    what changed since its last read."""
    if history is not None:
        return history, variable(history)
    if run is None:
        return [], []
    try:
        if hold is not None and not hold.take():
            host.count("run_lease_busy")
            raise Rejection(ErrorClass.TRANSIENT, (
                f"run {run.run_id!r}: another decision of this run held its lease for "
                f"longer than {host.run_lease_wait.total_seconds():g}s"),
                contract=contract)
        return run_history_now(host.histories, run.run_id, now - host.history_retention)
    except StoreError as error:
        raise Rejection(ErrorClass.TRANSIENT, f"the run history: {error}",
                        contract=contract) from None
