"""The receipt store contract: one record per operation ID, atomic claims with leases.

Every implementation (in-memory, SQLite, PostgreSQL) keeps exactly these guarantees; the
contract test suite in ``tests/store/`` runs each of them against every one.

The state machine of a receipt::

    (none) --claim--> claimed --finish--> succeeded | failed | outcome_unknown
    (none) --hold_for_confirmation--> awaiting_confirmation --claim_confirmed--> claimed
    claimed (lease expired) --claim--> claimed, outcome RECONCILE (the taker must reconcile)
    outcome_unknown --claim--> claimed, outcome RECONCILE
    failed (error_class transient) --claim--> claimed, outcome RETRY (nothing was sent before)
    any --open_review--> in_review --resolve_review--> succeeded | failed

Time always comes from the caller (``now``), never from the store's own clock, so a
test clock or a host clock decides lease expiry the same way for every implementation.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, NamedTuple, Protocol, Self, TypeVar

import msgspec

from callgate_rules.errors import OperationIdReused
from callgate_rules.store.scoping import Scope
from callgate_rules.taxonomy import ErrorClass


class ReceiptState(StrEnum):
    CLAIMED = "claimed"  # a worker holds the lease and is executing
    SUCCEEDED = "succeeded"  # the destination applied the write; result is its original answer
    FAILED = "failed"  # the write did not happen (error_class says why)
    OUTCOME_UNKNOWN = "outcome_unknown"  # sent, answer lost: must be reconciled before anything
    AWAITING_CONFIRMATION = "awaiting_confirmation"  # a person must confirm before execution
    IN_REVIEW = "in_review"  # handed over to a person


class ClaimOutcome(StrEnum):
    CLAIMED = "claimed"  # new record: the caller holds the lease and may execute
    RETRY = "retry"  # last attempt failed before sending: the caller holds the lease, may execute
    RECONCILE = "reconcile"  # an earlier holder died or lost the answer: reconcile, never re-send
    BUSY = "busy"  # another worker holds a live lease
    EXISTING = "existing"  # a terminal or waiting receipt: the caller must not execute


class ReviewStatus(StrEnum):
    OPEN = "open"
    TAKEN = "taken"
    RESOLVED = "resolved"


Made = TypeVar("Made")


def made(kind: type[Made], fields: dict[str, Any]) -> Made:
    """The frozen dataclass ``kind`` whose fields are ``fields``, every one of them in the
    order ``kind`` declares them, made without its ``__init__``, which sets each field
    through ``object.__setattr__`` (about 4 µs for a receipt's 20; an executed write makes an
    operation, an execution request, a claim and two receipts). It is the dataclass all the
    same (``==``, ``repr``, ``replace`` and ``fields`` see these values);
    ``tests/store/test_write_path.py`` and ``tests/pipeline/test_write_path_pipeline.py``
    hold each kind made so equal to one made the ordinary way."""
    value = object.__new__(kind)
    object.__setattr__(value, "__dict__", fields)
    return value


@dataclass(frozen=True)
class NewOperation:
    """What the gate knows about a write before it is claimed."""

    operation_id: str
    request_id: str
    tool: str
    contract_version: str
    args_hash: str
    arguments: Mapping[str, Any]
    actor: Mapping[str, Any]


@dataclass(frozen=True)
class Receipt:
    operation_id: str
    state: ReceiptState
    request_id: str
    tool: str
    contract_version: str
    args_hash: str
    arguments: Mapping[str, Any]
    actor: Mapping[str, Any]
    created_at: datetime
    updated_at: datetime
    result: Any = None  # the destination's original answer, kept apart from any retelling
    error_class: str | None = None
    detail: str | None = None
    confirmed_by: str | None = None
    confirmed_at: datetime | None = None
    confirmation_expires_at: datetime | None = None
    lease_owner: str | None = None
    lease_expires_at: datetime | None = None
    attempts: int = 0  # how many times a worker took the lease to execute or reconcile
    # the hash of the decision log line of the decision that executed the write
    # (``decision_log.line_hash``): ``callgate log verify --store`` finds the line by it
    log_line: str | None = None


@dataclass(frozen=True)
class Claim:
    outcome: ClaimOutcome
    receipt: Receipt

    @property
    def may_execute(self) -> bool:
        return self.outcome in (ClaimOutcome.CLAIMED, ClaimOutcome.RETRY)


@dataclass(frozen=True)
class NewReviewItem:
    tool: str
    reason: str  # the error class that sent it here
    summary: str  # one line for the person who picks it up
    operation_id: str | None = None
    payload: Mapping[str, Any] = field(default_factory=dict)  # the masked decision log record


@dataclass(frozen=True)
class ReviewItem:
    review_id: str
    tool: str
    reason: str
    summary: str
    operation_id: str | None
    payload: Mapping[str, Any]
    status: ReviewStatus
    created_at: datetime
    taken_by: str | None = None
    taken_at: datetime | None = None
    resolution: str | None = None  # "succeeded" or "failed"
    note: str | None = None
    resolved_by: str | None = None
    resolved_at: datetime | None = None


class ReceiptStore(Protocol):
    """Storage for receipts, claims and the review queue. All methods are atomic."""

    url: str  # where it lives, without any password

    def claim(
        self, op: NewOperation, *, worker: str, lease: timedelta, now: datetime
    ) -> Claim:
        """Claim ``op.operation_id`` for ``worker`` until ``now + lease``.

        Raises ``OperationIdReused`` when the ID exists with another ``args_hash``.
        """
        ...

    def renew(self, operation_id: str, *, worker: str, lease: timedelta, now: datetime) -> Receipt:
        """Extend the lease ``worker`` holds; raises ``LeaseLost`` if it no longer does."""
        ...

    def finish(
        self,
        operation_id: str,
        *,
        worker: str,
        state: ReceiptState,
        now: datetime,
        result: Any = None,
        error_class: str | None = None,
        detail: str | None = None,
    ) -> Receipt:
        """Record the outcome and release the lease; raises ``LeaseLost`` if not the holder."""
        ...

    def hold_for_confirmation(
        self, op: NewOperation, *, expires_at: datetime, now: datetime, detail: str | None = None
    ) -> Receipt:
        """Create an ``awaiting_confirmation`` receipt, or return the existing one.
        ``detail`` keeps what the person is asked to confirm (the draft) for a review page.

        Raises ``OperationIdReused`` when the ID exists with another ``args_hash``.
        """
        ...

    def claim_confirmed(
        self,
        operation_id: str,
        *,
        confirmed_by: str,
        worker: str,
        lease: timedelta,
        now: datetime,
    ) -> Claim:
        """Move ``awaiting_confirmation`` to ``claimed`` (outcome CLAIMED), recording who
        confirmed and when. A receipt in any other state is returned unchanged with outcome
        EXISTING (or BUSY), so a replayed confirmation can never execute twice."""
        ...

    def get(self, operation_id: str) -> Receipt | None: ...

    def link_log_line(self, operation_id: str, line: str) -> bool:
        """Keep ``line``, the hash of the log line of the decision that executed the
        operation, on its receipt: once (a receipt that names a line keeps it); ``False``
        when there is no such receipt or it names a line already."""
        ...

    def list_receipts(self, *, state: ReceiptState, limit: int = 100,
                      scope: Scope | None = None) -> list[Receipt]:
        """Up to ``limit`` receipts in ``state``, oldest first (pending confirmations for a
        review page, unknown outcomes for an operator); only those ``scope`` admits, when
        given (``store.scoping``), filtered in the store's query."""
        ...

    def open_review(self, item: NewReviewItem, *, now: datetime) -> ReviewItem:
        """Queue an item for a person; its receipt, if any, moves to ``in_review``."""
        ...

    def list_reviews(self, *, status: ReviewStatus | None = None,
                     scope: Scope | None = None) -> list[ReviewItem]: ...

    def take_review(self, *, reviewer: str, now: datetime,
                    scope: Scope | None = None) -> ReviewItem | None:
        """Give the oldest open item (that ``scope`` admits, when given) to ``reviewer``;
        two reviewers never get the same one."""
        ...

    def resolve_review(
        self, review_id: str, *, resolution: str, note: str, by: str, now: datetime
    ) -> ReviewItem:
        """Close an item as ``succeeded`` or ``failed``; its receipt takes that state."""
        ...

    def purge(self, *, older_than: datetime) -> int:
        """Delete finished receipts (succeeded, failed) and resolved review items last
        updated before ``older_than``; return how many rows went. Claims, unknown outcomes,
        pending confirmations and open reviews are never purged."""
        ...

    def close(self) -> None: ...


class ClosesOnExit:
    """``with store:`` closes the store at the end of the block. ``close()`` is idempotent:
    a second call does nothing; a closed store answers every call with ``StoreError``."""

    def close(self) -> None:  # pragma: no cover - every store defines its own
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: object, error: object, traceback: object) -> None:
        self.close()


# Rules every implementation shares ----------------------------------------------------------
#
# Each store locks the row (a mutex, ``BEGIN IMMEDIATE`` or ``SELECT ... FOR UPDATE``) and then
# decides with these functions, so the state machine above is written down exactly once.

FINISHED_STATES = frozenset({ReceiptState.SUCCEEDED, ReceiptState.FAILED})
OUTCOME_STATES = frozenset(
    {ReceiptState.SUCCEEDED, ReceiptState.FAILED, ReceiptState.OUTCOME_UNKNOWN}
)
RESOLUTIONS = frozenset({ReceiptState.SUCCEEDED.value, ReceiptState.FAILED.value})


def claim_outcome(receipt: Receipt, *, now: datetime) -> ClaimOutcome:
    """What ``claim`` yields on an existing receipt with the same ``args_hash``.

    RETRY and RECONCILE mean the claimer takes the lease over (and ``attempts`` grows); BUSY
    and EXISTING leave the receipt as it is.
    """
    if receipt.state is ReceiptState.CLAIMED:
        if receipt.lease_expires_at is not None and receipt.lease_expires_at > now:
            return ClaimOutcome.BUSY
        return ClaimOutcome.RECONCILE
    if receipt.state is ReceiptState.OUTCOME_UNKNOWN:
        return ClaimOutcome.RECONCILE
    if receipt.state is ReceiptState.FAILED and receipt.error_class == ErrorClass.TRANSIENT:
        return ClaimOutcome.RETRY
    return ClaimOutcome.EXISTING


def replayed_confirmation_outcome(receipt: Receipt, *, now: datetime) -> ClaimOutcome:
    """What ``claim_confirmed`` yields on a receipt no longer awaiting confirmation."""
    if claim_outcome(receipt, now=now) is ClaimOutcome.BUSY:
        return ClaimOutcome.BUSY
    return ClaimOutcome.EXISTING


def holds_lease(receipt: Receipt, worker: str) -> bool:
    """A lease belongs to its worker until another claim takes it over.

    Expiry only makes a lease *takeable*: a worker that finishes late, before anyone took
    over, records a true outcome and collides with no one. A takeover changes the owner, so
    from then on the old worker is fenced off (``renew`` and ``finish`` raise ``LeaseLost``).
    """
    return receipt.state is ReceiptState.CLAIMED and receipt.lease_owner == worker


def resolved_error_class(resolution: str, reason: str) -> str | None:
    """The error class a receipt keeps once a person resolved its review item.

    A failure keeps the reason that sent it to review, so a later claim follows the state
    machine: only a ``transient`` reason (nothing was sent) allows a retry.
    """
    return None if resolution == ReceiptState.SUCCEEDED.value else reason


def check_same_arguments(existing: Receipt, op: NewOperation) -> None:
    """An operation ID names one call: raise ``OperationIdReused`` if ``op`` is another."""
    if existing.args_hash != op.args_hash:
        raise OperationIdReused(operation_id_reused_message(existing, op))


def check_outcome_state(state: ReceiptState) -> None:
    if state not in OUTCOME_STATES:
        raise ValueError(f"finish records succeeded, failed or outcome_unknown, not {state}")


def check_resolution(resolution: str) -> None:
    if resolution not in RESOLUTIONS:
        raise ValueError(f"a review resolves as 'succeeded' or 'failed', not {resolution!r}")


def operation_id_reused_message(existing: Receipt, op: NewOperation) -> str:
    return (
        f"operation ID {op.operation_id!r} already names a {existing.tool} call with other "
        f"arguments (args_hash {existing.args_hash}, not {op.args_hash})"
    )


def lease_lost_message(operation_id: str, worker: str) -> str:
    return f"worker {worker!r} no longer holds the claim on operation {operation_id!r}"


def as_utc(moment: datetime) -> datetime:
    """``moment`` in UTC; a naive datetime is refused because its zone would be a guess."""
    if moment.tzinfo is UTC:  # nearly always (the gate's clock): already what is asked for
        return moment
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"a timezone-aware datetime is required, got naive {moment.isoformat()}")
    return moment.astimezone(UTC)


# ``json.dumps`` with options makes an encoder per call; one made once encodes the same.
_CANONICAL = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"))
_write_fast = msgspec.json.Encoder(order="sorted").encode


def canonical_json(value: Any) -> str:
    """One spelling per JSON value (sorted keys, no spaces), so equal arguments and results
    are stored byte for byte.

    msgspec writes it, about four times faster than the standard library, whenever what it
    wrote reads back as the value itself; the standard library writes everything else as
    it always has: a tuple, NaN and the infinities (msgspec writes ``null``), an integer
    key, a lone surrogate, a type msgspec knows and ``json`` refuses (a ``datetime``, a
    ``Decimal``, a dataclass: refused as before). The two differ only in how they spell
    an exponent (``1e16``, ``1e+16``), which every reader reads alike."""
    fast = _written_fast(value, _read_fast)
    return _CANONICAL.encode(value) if fast is None else fast[0]


_read_fast = msgspec.json.Decoder().decode
_REFUSED = (msgspec.DecodeError, RecursionError, UnicodeError)


def read_stored_json(text: str | bytes) -> Any:
    """A stored JSON text as Python values, exactly as ``json.loads`` reads it: msgspec
    reads what it accepts (about five times faster), the standard library what msgspec
    refuses (NaN and infinities, numbers beyond a double, lone surrogates, deep nesting)."""
    try:
        return _read_fast(text)
    except _REFUSED:
        return json.loads(text)


class WrittenJson(NamedTuple):
    """How a store's JSON column gives back the text written into it, read as Python
    values: ``fast``, msgspec's reading, which raises what ``_REFUSED`` names for a text
    it cannot read; ``whole``, any text (the standard library's reading of what msgspec
    refuses). A column that keeps the text reads it as ``read_stored_json`` does
    (``AS_WRITTEN``); PostgreSQL's jsonb respells some numbers (``store.postgres``)."""

    fast: Callable[[bytes], Any]
    whole: Callable[[str], Any]


# A column that keeps the text it was given (SQLite's TEXT)
AS_WRITTEN = WrittenJson(_read_fast, read_stored_json)


def stored_json(value: Any, column: WrittenJson = AS_WRITTEN) -> tuple[str, Any]:
    """``canonical_json(value)`` and the values ``column`` gives back for it: the text a
    store writes and what a read of it gives. That read is the one that proves msgspec's
    text is the value's own (a column's reading differs from a plain one only in numbers,
    each read as the decimal its literal spells, so it equals the value only where a plain
    read does), so a store that builds a receipt from what it wrote decodes nothing
    twice."""
    fast = _written_fast(value, column.fast)
    if fast is not None:
        return fast
    text = _CANONICAL.encode(value)
    return text, column.whole(text)


def _written_fast(value: Any, read: Callable[[bytes], Any]) -> tuple[str, Any] | None:
    """msgspec's text of ``value`` and ``read`` of it, when that read is the value itself."""
    try:
        written = _write_fast(value)
        read_back = read(written)
        if read_back == value:
            return written.decode(), read_back
    except Exception:  # noqa: BLE001 - whatever msgspec cannot write, json decides
        pass
    return None
