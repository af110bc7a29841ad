"""Step 5 — EXECUTE: run a write at most once under a runtime-made operation ID.

The gate claims the operation ID in the receipt store before it calls the executor, passes
the ID and a deadline to it, enforces the contract's timeout, and classifies whatever the
executor raises. The one distinction that matters most is *when* it failed: before sending
(nothing happened, a retry is safe) or after sending (the outcome is unknown, only
reconciliation may decide).

The timeout is enforced by calling the executor in a thread of its own (``_Hand``) and
waiting for it at most that long. An executor that keeps the deadline itself (an HTTP
client given the time left, an upstream call that gives up in time) is marked with
``keeps_deadline`` and called in the calling thread instead: waking another thread and
waking the caller again can cost as much as all the rest of the gate's own work for a
write, on a machine whose idle processors sleep (``README.md``, Benchmarks).
"""

from __future__ import annotations

import _thread
import contextvars
import functools
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from callgate_rules.documents.model import Contract, ErrorMapping
from callgate_rules.errors import AfterSending, RateLimited, ToolError
from callgate_rules.taxonomy import ErrorClass


@dataclass(frozen=True)
class ExecutionRequest:
    """What an executor (the host's tool function) receives."""

    tool: str
    arguments: Mapping[str, Any]  # validated arguments
    operation_id: str  # made by the runtime; pass it to the destination as idempotency key
    deadline: datetime  # answer before this, or the gate treats the outcome as unknown
    actor: Mapping[str, Any]
    records: Mapping[str, Any] = field(default_factory=dict)  # looked-up records by name


Executor = Callable[[ExecutionRequest], Any]
# Ask the destination whether an operation happened: its original result, or None.
Finder = Callable[[str, str], Any]  # (tool, operation_id) → result or None


@dataclass(frozen=True)
class Sent:
    """The executor answered: ``result`` is the destination's original answer."""

    result: Any


@dataclass(frozen=True)
class Failed:
    """The executor raised; ``error_class`` says what that means for a retry."""

    error_class: ErrorClass
    detail: str
    retry_after: float | None = None


Outcome = Sent | Failed


class DeadlineKeeping:
    """An executor that answers (or raises) by its request's ``deadline`` on its own, so the
    gate calls it in the calling thread (``keeps_deadline``). It reads as the function it
    marks (``__name__``, ``__doc__``, ``__wrapped__``), and a marked method read from its
    object is that object's method, still marked."""

    __wrapped__: Callable[..., Any]
    __name__: str
    # what ``lookups.ask`` reads: a resolver marked so is called in the calling thread too
    callgate_keeps_deadline = True

    def __init__(self, function: Callable[..., Any]) -> None:
        self.function = function
        functools.update_wrapper(self, function)

    def __call__(self, *arguments: Any) -> Any:  # an executor's request, a resolver's two
        return self.function(*arguments)

    def __get__(self, instance: object, owner: type | None = None) -> DeadlineKeeping:
        # As Python binds a class attribute: through its type's ``__get__``, if it has one
        # (a function does; a callable object does not).
        bind = getattr(type(self.function), "__get__", None)
        if instance is None or bind is None:
            return self
        return DeadlineKeeping(bind(self.function, instance, owner))

    def __repr__(self) -> str:
        return f"keeps_deadline({self.function!r})"


def keeps_deadline(executor: Callable[..., Any]) -> DeadlineKeeping:
    """Mark ``executor`` as keeping ``request.deadline`` itself: the gate then calls it in
    the calling thread, not in the thread that lets ``handle`` return at the contract's
    timeout while an executor hangs. Its answer is taken whenever it comes, so an executor
    that overruns holds ``handle`` up for as long; raise ``OutcomeTimeout`` when the
    deadline passed after sending (``request.deadline`` is the gate clock's instant). Mark
    last: a decorator applied over the mark hides it."""
    if isinstance(executor, DeadlineKeeping):
        return executor
    if not callable(executor):
        raise TypeError(f"keeps_deadline takes an executor, a callable; got {executor!r}")
    return DeadlineKeeping(executor)


class _Hand:
    """One long-lived thread that runs a calling thread's executors, so that the caller can
    stop waiting at the timeout while the executor goes on (its outcome is then unknown).

    The hand-off is two plain locks used as signals, one each way: the caller leaves the
    job and releases ``_go``; the hand runs it, leaves the outcome and releases ``_done``,
    which the caller acquires with the timeout. That is the least a thread hop costs: no
    future, no condition variable, no queue (``ThreadPoolExecutor`` cost about twice as
    much). A hand whose caller stopped waiting is given up: its thread ends once the
    executor returns, and the caller's next call gets a new hand, so a hung executor never
    holds up a later call. ``_settle`` orders the two sides' last steps, so that a hand
    that answers just as its caller gives up is told to stop rather than left waiting."""

    __slots__ = ("_go", "_done", "_settle", "_job", "_outcome", "_given_up", "generation")

    def __init__(self) -> None:
        self._go, self._done = _thread.allocate_lock(), _thread.allocate_lock()
        self._settle = _thread.allocate_lock()
        self._go.acquire()
        self._done.acquire()
        self._job: tuple[contextvars.Context, Executor, ExecutionRequest] | None = None
        self._outcome: tuple[bool, Any] = (False, None)
        self._given_up = False
        self.generation = _generation
        # A daemon: an executor that never returns must not keep the process from exiting.
        threading.Thread(target=self._serve, name="callgate-executor", daemon=True).start()

    def _serve(self) -> None:
        while True:
            self._go.acquire()
            job = self._job
            if job is None:  # given up while it was waiting for the next job
                return
            context, executor, request = job
            try:
                self._outcome = (True, context.run(executor, request))
            except BaseException as error:  # noqa: BLE001 - handed back to the caller
                self._outcome = (False, error)
            with self._settle:
                self._done.release()
                if self._given_up:
                    return

    def run(self, executor: Executor, request: ExecutionRequest, timeout: float) -> Any:
        """``executor(request)`` in the caller's context; raises ``TimeoutError`` when no
        answer came within ``timeout`` seconds (the executor may still be running)."""
        # The executor runs in the caller's context (tracing spans, an async host's event
        # loop for ``AsyncGate``), as it would were it called in the caller's thread.
        self._job = (contextvars.copy_context(), executor, request)
        self._go.release()
        try:
            in_time = self._done.acquire(True, timeout)
        except BaseException:  # interrupted while waiting: this hand's answer is not ours
            self._give_up()
            raise
        if not in_time:
            self._give_up()
            raise TimeoutError
        self._job = None
        answered, outcome = self._outcome
        self._outcome = (False, None)  # keep no result alive between calls
        if answered:
            return outcome
        raise outcome

    def _give_up(self) -> None:
        with self._settle:
            self._given_up = True
            answered_meanwhile = self._done.acquire(False)
        if answered_meanwhile:  # it waits for a next job: there is none
            self._stop()
        _hands.owner = None

    def _stop(self) -> None:
        self._job = None
        self._go.release()

    def caller_ended(self) -> None:
        """The calling thread is gone: no job will come, so the hand's thread ends (a given-up
        hand ends on its own once its executor returns)."""
        with self._settle:
            if self._given_up:
                return
            self._given_up = True
        self._stop()


class _Owner:
    """What a calling thread keeps of its hand. The hand's own thread holds the hand, not
    this: when the calling thread ends, its thread-local value goes, and with it this, which
    tells the hand to end too, so a host that starts a thread per request leaves no idle
    threads behind."""

    __slots__ = ("hand",)

    def __init__(self, hand: _Hand) -> None:
        self.hand = hand

    def __del__(self) -> None:
        self.hand.caller_ended()


# Each calling thread has its own hand; a child process after ``fork`` has none of its
# parent's threads, so a hand made before the fork is never used in the child.
_hands = threading.local()
_generation = 0


def _forked() -> None:
    global _generation
    _generation += 1


os.register_at_fork(after_in_child=_forked)


def _hand() -> _Hand:
    owner: _Owner | None = getattr(_hands, "owner", None)
    if owner is None or owner.hand.generation != _generation:
        if owner is not None:  # made before a fork: its thread is not in this process
            owner.hand._given_up = True
        owner = _hands.owner = _Owner(_Hand())
    return owner.hand


def hand_run(job: Executor, timeout: float) -> Any:
    """``job(None)`` in the calling thread's hand, waited for at most ``timeout`` seconds
    (``TimeoutError`` past it, the job going on): how ``lookups`` calls a resolver."""
    return _hand().run(job, None, max(timeout, 0.0))  # type: ignore[arg-type]


def send(executor: Executor, request: ExecutionRequest, contract: Contract,
         timeout: float) -> Outcome:
    """Call the executor with a timeout (in the calling thread when it keeps the deadline
    itself). A timeout is an unknown outcome: the call may still complete at the
    destination, which is exactly what reconciliation is for."""
    try:
        if isinstance(executor, DeadlineKeeping):  # in a copy of the context, as a hand
            return Sent(contextvars.copy_context().run(executor.function, request))
        return Sent(_hand().run(executor, request, max(timeout, 0.0)))
    except TimeoutError:  # as before the hand: an executor's own TimeoutError counts too
        return Failed(ErrorClass.UNKNOWN_OUTCOME,
                      f"no answer within {timeout:g}s after sending")
    except Exception as error:  # noqa: BLE001 - every executor failure is classified
        return Failed(classify(error, contract.errors), _describe(error),
                      error.retry_after if isinstance(error, RateLimited) else None)


def classify(error: BaseException, table: tuple[ErrorMapping, ...]) -> ErrorClass:
    """The error class of an executor's exception: the contract's table first (the row whose
    exception class is nearest in the exception's MRO wins; a row with an attribute
    condition beats one without), then callgate's own taxonomy, then ``unknown_outcome`` —
    an unexpected exception may have happened after sending, so it is never retried blind."""
    mro = [cls.__name__ for cls in type(error).__mro__]
    best: tuple[int, int, ErrorClass] | None = None
    for row in table:
        distance = mro.index(row.exception) if row.exception in mro else (
            len(mro) if row.exception is None else -1)
        if distance < 0:
            continue
        if row.attribute is not None:
            if getattr(error, row.attribute, object()) != row.equals:
                continue
            specificity = 0
        else:
            specificity = 1
        rank = (distance, specificity, row.error_class)
        if best is None or rank[:2] < best[:2]:
            best = rank
    if best is not None:
        return best[2]
    if isinstance(error, ToolError):
        return error.error_class
    if isinstance(error, TimeoutError | ConnectionError):
        return AfterSending.error_class
    return ErrorClass.UNKNOWN_OUTCOME


def _describe(error: BaseException) -> str:
    text = str(error)
    return f"{type(error).__name__}: {text[:300]}" if text else type(error).__name__
