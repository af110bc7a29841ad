"""Step 5 — EXECUTE: run a write at most once under a runtime-made operation ID.

The gate claims the operation ID in the receipt store before it calls the executor, passes
the ID and a deadline to it, enforces the contract's timeout, and classifies whatever the
executor raises. The one distinction that matters most is *when* it failed: before sending
(nothing happened, a retry is safe) or after sending (the outcome is unknown, only
reconciliation may decide).
"""

from __future__ import annotations

import concurrent.futures
import contextvars
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

_pool = concurrent.futures.ThreadPoolExecutor(max_workers=32, thread_name_prefix="callgate")


def send(executor: Executor, request: ExecutionRequest, contract: Contract,
         timeout: float) -> Outcome:
    """Call the executor with a timeout. A timeout is an unknown outcome: the call may still
    complete at the destination, which is exactly what reconciliation is for."""
    # The executor runs in the caller's context (tracing spans, an async host's event loop
    # for ``AsyncGate``), as it would were it called in the caller's thread.
    future = _pool.submit(contextvars.copy_context().run, executor, request)
    try:
        return Sent(future.result(timeout=max(timeout, 0.0)))
    except concurrent.futures.TimeoutError:
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
