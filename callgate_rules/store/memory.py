"""The receipt store in a dict behind a lock: for unit tests and single-process experiments.

Every value goes through canonical JSON on the way in and out, so it behaves like the
database stores (tuples come back as lists, callers cannot mutate what was stored) and a test
that passes here does not pass by accident of object identity.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from callgate_rules.errors import LeaseLost, StoreError
from callgate_rules.store.base import (
    FINISHED_STATES,
    Claim,
    ClaimOutcome,
    ClosesOnExit,
    NewOperation,
    NewReviewItem,
    Receipt,
    ReceiptState,
    ReviewItem,
    ReviewStatus,
    as_utc,
    check_outcome_state,
    check_resolution,
    check_same_arguments,
    claim_outcome,
    holds_lease,
    lease_lost_message,
    replayed_confirmation_outcome,
    resolved_error_class,
    stored_json,
)
from callgate_rules.store.history import MemoryHistory
from callgate_rules.store.intents import MemoryIntents
from callgate_rules.store.scoping import Scope
from callgate_rules.store.sessions import MemorySessions


def _json_copy(value: Any) -> Any:
    return stored_json(value)[1]  # what an SQL store's read of the stored text gives


def _new_receipt(op: NewOperation, state: ReceiptState, now: datetime,
                 **fields: Any) -> Receipt:
    """The first receipt of ``op``, in ``state``; ``fields`` are the state's own."""
    return Receipt(operation_id=op.operation_id, state=state, request_id=op.request_id,
                   tool=op.tool, contract_version=op.contract_version, args_hash=op.args_hash,
                   arguments=_json_copy(op.arguments), actor=_json_copy(op.actor),
                   created_at=now, updated_at=now, **fields)


def _detached(receipt: Receipt) -> Receipt:
    return replace(
        receipt,
        arguments=_json_copy(receipt.arguments),
        actor=_json_copy(receipt.actor),
        result=_json_copy(receipt.result),
    )


class MemoryStore(MemoryHistory, MemoryIntents, MemorySessions, ClosesOnExit):
    """A ``ReceiptStore`` that lives and dies with the process."""

    def __init__(self) -> None:
        MemoryHistory.__init__(self)
        MemoryIntents.__init__(self)
        MemorySessions.__init__(self)
        self.url = "memory:"
        self._lock = threading.Lock()
        self._receipts: dict[str, Receipt] = {}
        # Insertion order is queue order: dicts keep it, and ``created_at`` breaks no ties.
        self._reviews: dict[str, ReviewItem] = {}
        self._closed = False

    # Receipts ------------------------------------------------------------------------------

    def claim(
        self, op: NewOperation, *, worker: str, lease: timedelta, now: datetime
    ) -> Claim:
        now = as_utc(now)
        with self._lock:
            self._check_open()
            existing = self._receipts.get(op.operation_id)
            if existing is None:
                receipt = _new_receipt(op, ReceiptState.CLAIMED, now, lease_owner=worker,
                                       lease_expires_at=now + lease, attempts=1)
                self._receipts[op.operation_id] = receipt
                return Claim(ClaimOutcome.CLAIMED, _detached(receipt))
            check_same_arguments(existing, op)
            outcome = claim_outcome(existing, now=now)
            if outcome in (ClaimOutcome.BUSY, ClaimOutcome.EXISTING):
                return Claim(outcome, _detached(existing))
            taken = replace(
                existing,
                state=ReceiptState.CLAIMED,
                lease_owner=worker,
                lease_expires_at=now + lease,
                attempts=existing.attempts + 1,
                updated_at=now,
            )
            self._receipts[op.operation_id] = taken
            return Claim(outcome, _detached(taken))

    def renew(self, operation_id: str, *, worker: str, lease: timedelta, now: datetime) -> Receipt:
        now = as_utc(now)
        with self._lock:
            self._check_open()
            held = self._held(operation_id, worker)
            renewed = replace(held, lease_expires_at=now + lease, updated_at=now)
            self._receipts[operation_id] = renewed
            return _detached(renewed)

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
        check_outcome_state(state)
        now = as_utc(now)
        with self._lock:
            self._check_open()
            held = self._held(operation_id, worker)
            finished = replace(
                held,
                state=state,
                result=_json_copy(result),
                error_class=error_class,
                detail=detail,
                lease_owner=None,
                lease_expires_at=None,
                updated_at=now,
            )
            self._receipts[operation_id] = finished
            return _detached(finished)

    def hold_for_confirmation(
        self, op: NewOperation, *, expires_at: datetime, now: datetime, detail: str | None = None
    ) -> Receipt:
        now = as_utc(now)
        expires_at = as_utc(expires_at)
        with self._lock:
            self._check_open()
            existing = self._receipts.get(op.operation_id)
            if existing is not None:
                check_same_arguments(existing, op)
                return _detached(existing)
            held = _new_receipt(op, ReceiptState.AWAITING_CONFIRMATION, now,
                                confirmation_expires_at=expires_at, detail=detail)
            self._receipts[op.operation_id] = held
            return _detached(held)

    def claim_confirmed(
        self,
        operation_id: str,
        *,
        confirmed_by: str,
        worker: str,
        lease: timedelta,
        now: datetime,
    ) -> Claim:
        now = as_utc(now)
        with self._lock:
            self._check_open()
            existing = self._receipts.get(operation_id)
            if existing is None:
                raise StoreError(f"no receipt for operation {operation_id!r} to confirm")
            if existing.state is not ReceiptState.AWAITING_CONFIRMATION:
                return Claim(replayed_confirmation_outcome(existing, now=now), _detached(existing))
            claimed = replace(
                existing,
                state=ReceiptState.CLAIMED,
                confirmed_by=confirmed_by,
                confirmed_at=now,
                lease_owner=worker,
                lease_expires_at=now + lease,
                attempts=existing.attempts + 1,
                updated_at=now,
            )
            self._receipts[operation_id] = claimed
            return Claim(ClaimOutcome.CLAIMED, _detached(claimed))

    def get(self, operation_id: str) -> Receipt | None:
        with self._lock:
            self._check_open()
            receipt = self._receipts.get(operation_id)
            return None if receipt is None else _detached(receipt)

    def link_log_line(self, operation_id: str, line: str) -> bool:
        with self._lock:
            self._check_open()
            receipt = self._receipts.get(operation_id)
            if receipt is None or receipt.log_line is not None:
                return False
            self._receipts[operation_id] = replace(receipt, log_line=line)
            return True

    def list_receipts(self, *, state: ReceiptState, limit: int = 100,
                      scope: Scope | None = None) -> list[Receipt]:
        with self._lock:
            self._check_open()
            found = sorted((r for r in self._receipts.values() if r.state is state and
                            (scope is None or scope.admits(r.tool, r.actor))),
                           key=lambda receipt: receipt.created_at)
            return [_detached(receipt) for receipt in found[:limit]]

    # Review queue --------------------------------------------------------------------------

    def open_review(self, item: NewReviewItem, *, now: datetime) -> ReviewItem:
        now = as_utc(now)
        with self._lock:
            self._check_open()
            review = ReviewItem(
                review_id=str(uuid.uuid4()),
                tool=item.tool,
                reason=item.reason,
                summary=item.summary,
                operation_id=item.operation_id,
                payload=_json_copy(item.payload),
                status=ReviewStatus.OPEN,
                created_at=now,
            )
            self._reviews[review.review_id] = review
            receipt = None if item.operation_id is None else self._receipts.get(item.operation_id)
            if receipt is not None:
                self._receipts[receipt.operation_id] = replace(
                    receipt,
                    state=ReceiptState.IN_REVIEW,
                    lease_owner=None,
                    lease_expires_at=None,
                    updated_at=now,
                )
            return _detached_review(review)

    def list_reviews(self, *, status: ReviewStatus | None = None,
                     scope: Scope | None = None) -> list[ReviewItem]:
        with self._lock:
            self._check_open()
            return [
                _detached_review(review)
                for review in self._queue_order()
                if (status is None or review.status is status) and self._in_scope(review, scope)
            ]

    def _in_scope(self, review: ReviewItem, scope: Scope | None) -> bool:
        """A review item's actor is its receipt's, else the one its payload recorded."""
        if scope is None:
            return True
        receipt = (None if review.operation_id is None else
            self._receipts.get(review.operation_id))
        actor = receipt.actor if receipt is not None else review.payload.get("actor")
        return scope.admits(review.tool, actor if isinstance(actor, Mapping) else None)

    def take_review(self, *, reviewer: str, now: datetime,
                    scope: Scope | None = None) -> ReviewItem | None:
        now = as_utc(now)
        with self._lock:
            self._check_open()
            for review in self._queue_order():
                if review.status is ReviewStatus.OPEN and self._in_scope(review, scope):
                    taken = replace(
                        review, status=ReviewStatus.TAKEN, taken_by=reviewer, taken_at=now
                    )
                    self._reviews[review.review_id] = taken
                    return _detached_review(taken)
            return None

    def resolve_review(
        self, review_id: str, *, resolution: str, note: str, by: str, now: datetime
    ) -> ReviewItem:
        check_resolution(resolution)
        now = as_utc(now)
        with self._lock:
            self._check_open()
            review = self._reviews.get(review_id)
            if review is None:
                raise StoreError(f"no review item {review_id!r}")
            if review.status is ReviewStatus.RESOLVED:
                raise StoreError(f"review item {review_id!r} is already resolved")
            resolved = replace(
                review,
                status=ReviewStatus.RESOLVED,
                resolution=resolution,
                note=note,
                resolved_by=by,
                resolved_at=now,
            )
            self._reviews[review_id] = resolved
            receipt = None if review.operation_id is None else self._receipts.get(
                review.operation_id
            )
            if receipt is not None:
                self._receipts[receipt.operation_id] = replace(
                    receipt,
                    state=ReceiptState(resolution),
                    error_class=resolved_error_class(resolution, review.reason),
                    detail=note,
                    lease_owner=None,
                    lease_expires_at=None,
                    updated_at=now,
                )
            return _detached_review(resolved)

    # Housekeeping --------------------------------------------------------------------------

    def purge(self, *, older_than: datetime) -> int:
        older_than = as_utc(older_than)
        with self._lock:
            self._check_open()
            old_receipts = [
                operation_id
                for operation_id, receipt in self._receipts.items()
                if receipt.state in FINISHED_STATES and receipt.updated_at < older_than
            ]
            old_reviews = [
                review_id
                for review_id, review in self._reviews.items()
                if review.status is ReviewStatus.RESOLVED
                and review.resolved_at is not None
                and review.resolved_at < older_than
            ]
            for operation_id in old_receipts:
                del self._receipts[operation_id]
            for review_id in old_reviews:
                del self._reviews[review_id]
            return len(old_receipts) + len(old_reviews)

    def close(self) -> None:
        with self._lock:
            self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("the receipt store memory: is closed")

    def _held(self, operation_id: str, worker: str) -> Receipt:
        receipt = self._receipts.get(operation_id)
        if receipt is None or not holds_lease(receipt, worker):
            raise LeaseLost(lease_lost_message(operation_id, worker))
        return receipt

    def _queue_order(self) -> list[ReviewItem]:
        # A stable sort keeps insertion order among items created at the same instant.
        return sorted(self._reviews.values(), key=lambda review: review.created_at)


def _detached_review(review: ReviewItem) -> ReviewItem:
    return replace(review, payload=_json_copy(review.payload))
