"""Step 3 — VALIDATE's look-ups under the contract's deadline.

A synchronous resolver (a look-up function the host passes) cannot be interrupted. So that
one that hangs never holds a decision past its contract's ``timeout_seconds``, the gate
calls it in another thread — the calling thread's hand, as it calls executors
(``execute._Hand``) — and waits for it at most until the deadline. Past it, the decision
returns ``transient`` ("could not be checked right now") and the look-up is *abandoned*:
its thread runs on until the resolver returns, and its late answer is dropped.

Abandoned look-ups are threads; so that a resolver that always hangs cannot pile them up,
their number in flight is bounded (``abandoned_limit``, default 16, or
``CALLGATE_MAX_ABANDONED_LOOKUPS``): while the bound is reached, a new look-up is not
started and fails fast as ``transient``. ``abandoned()`` tells how many are in flight and
how many there have been (``Gate.abandoned_lookups`` reads it).

A finder (the function a host passes in ``Gate(finder=...)`` to ask the destination
whether an operation happened, step 6) is a look-up by operation ID and is held to the
same contract: ``find`` calls it in the hand's thread and waits at most the contract's
timeout; past it the reconciliation could not be made (``LookupLate``), the late answer
is dropped, and the call counts among the abandoned look-ups.

A resolver (or finder) that keeps the deadline itself — an in-memory table, an HTTP client with a
total deadline — is marked with ``execute.keeps_deadline`` (or has a true
``callgate_keeps_deadline`` attribute, as ``harness.world.CollectionResolver`` does) and is
called in the calling thread, without the hop (a thread hop costs about as much as a small
decision).
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, cast

from callgate_rules.pipeline import execute

MAX_ABANDONED_VARIABLE = "CALLGATE_MAX_ABANDONED_LOOKUPS"
DEFAULT_MAX_ABANDONED = 16
# More records than this from one look-up is junk, not data (a generator may never end).
MAX_RECORDS = 10_000


class LookupLate(TimeoutError):
    """The look-ups did not answer by the contract's deadline; ``seconds``: time spent."""

    def __init__(self, seconds: float, message: str) -> None:
        self.seconds = seconds
        super().__init__(message)


@dataclass(frozen=True)
class AbandonedLookups:
    """Look-ups given up at their deadline: ``in_flight`` still running, ``total`` since the
    process started, ``refused`` not started because the bound was reached, ``limit``."""

    in_flight: int
    total: int
    refused: int
    limit: int


class _Abandoned:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.in_flight = 0
        self.total = 0
        self.refused = 0
        self.limit = _limit_from_environment()


def _limit_from_environment() -> int:
    text = os.environ.get(MAX_ABANDONED_VARIABLE, "").strip()
    try:
        return max(int(text), 0) if text else DEFAULT_MAX_ABANDONED
    except ValueError:
        return DEFAULT_MAX_ABANDONED


_ABANDONED = _Abandoned()


def _forked() -> None:
    """A child process has none of its parent's threads, so none of its abandoned look-ups."""
    _ABANDONED.lock = threading.Lock()
    _ABANDONED.in_flight = 0


os.register_at_fork(after_in_child=_forked)


def abandoned() -> AbandonedLookups:
    """How many look-ups were abandoned at their deadline (in flight, ever, refused)."""
    state = _ABANDONED
    with state.lock:
        return AbandonedLookups(state.in_flight, state.total, state.refused, state.limit)


def set_abandoned_limit(limit: int) -> None:
    """Bound the abandoned look-ups in flight (process-wide: they are the process's
    threads); ``0`` starts no look-up in a thread of its own while one is still running."""
    if limit < 0:
        raise ValueError("the bound of abandoned look-ups is a count, 0 or more")
    with _ABANDONED.lock:
        _ABANDONED.limit = limit


class _Job:
    """One look-up in the hand's thread (a resolver's, or a finder's); tells the count when
    it ends after being abandoned."""

    __slots__ = ("work", "done", "abandoned")

    def __init__(self, work: Callable[[], Any]) -> None:
        self.work = work
        self.done = False
        self.abandoned = False

    def __call__(self, _: object) -> Any:
        try:
            return self.work()
        finally:
            state = _ABANDONED
            with state.lock:
                self.done = True
                if self.abandoned:
                    state.in_flight -= 1


def _materialised(found: Any) -> Any:
    """A lazy answer (a generator) read in the resolver's thread, where the deadline holds
    — at most one record past ``MAX_RECORDS``, for ``validate.records_of`` to refuse."""
    if (isinstance(found, list | tuple | str | bytes | Mapping) or
            not isinstance(found, Iterable)):
        return found
    return list(itertools.islice(found, MAX_RECORDS + 1))


def resolve(resolver: Callable[..., Any], fields: tuple[str, ...], key: Any) -> Any:
    """What ``resolver`` finds for ``key`` by each of ``fields``: one field's answer as it
    came (``validate.records_of`` checks it), several fields' records once each."""
    if len(fields) == 1:
        return resolver(fields[0], key)
    found: list[Any] = []
    seen: set[int] = set()
    for field in fields:
        for record in resolver(field, key):
            if id(record) not in seen:
                seen.add(id(record))
                found.append(record)
    return found


def ask(resolver: Callable[..., Any], fields: tuple[str, ...], key: Any,
        started: float, timeout: float) -> Any:
    """What ``resolver`` answers for ``key`` by ``fields``, by ``started + timeout``
    (``time.perf_counter`` seconds); ``LookupLate`` when it does not answer in time, or
    when too many abandoned look-ups are still running to start one more."""
    if getattr(resolver, "callgate_keeps_deadline", False):  # in memory, or bounded itself
        # one field, the commonest, asked straight away: ``resolve`` passes its answer on
        return resolver(fields[0], key) if len(fields) == 1 else resolve(resolver, fields, key)
    return _in_time(partial(_read_in_time, resolver, fields, key), started, timeout)


def _read_in_time(resolver: Callable[..., Any], fields: tuple[str, ...], key: Any) -> Any:
    """``resolve``, a lazy answer read whole: what runs in the hand's thread. (A function of
    its own, not a closure in ``ask``: a closure's cells would be made on every call.)"""
    return _materialised(resolve(resolver, fields, key))


def find(finder: Callable[[str, str], Any], tool: str, operation_id: str,
         timeout: float) -> Any:
    """What ``finder`` answers for ``operation_id`` of ``tool``, within ``timeout`` seconds
    from now; ``LookupLate`` as ``ask``. A finder that keeps the deadline itself (marked
    ``keeps_deadline``, as the MCP gateway's is) is called in the calling thread."""
    if getattr(finder, "callgate_keeps_deadline", False):
        return finder(tool, operation_id)
    return _in_time(lambda: finder(tool, operation_id), time.perf_counter(), timeout)


def _in_time(work: Callable[[], Any], started: float, timeout: float) -> Any:
    """``work()`` in the calling thread's hand, by ``started + timeout``; abandoned (and
    counted) past it, refused while too many abandoned look-ups still run."""
    left = started + timeout - time.perf_counter()
    if left <= 0:
        raise LookupLate(timeout, f"no time left of the contract's {timeout:g}s timeout")
    state = _ABANDONED
    if state.in_flight >= state.limit:  # read without the lock: a bound, not a ledger
        with state.lock:
            state.refused += 1
        raise LookupLate(0.0, f"{state.in_flight} look-ups given up at their deadline are "
                         f"still running (the bound is {state.limit}); not starting another")
    job = _Job(work)
    try:
        return execute.hand_run(cast(execute.Executor, job), left)
    except TimeoutError:
        if job.done:  # the resolver's own TimeoutError, raised in time
            raise
        with state.lock:
            if not job.done:
                job.abandoned = True
                state.in_flight += 1
                state.total += 1
        raise LookupLate(time.perf_counter() - started,
                         f"no answer within the contract's {timeout:g}s timeout") from None
