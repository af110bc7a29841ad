"""Every guarantee of ``callgate_rules.store.base``, checked on every store implementation.

Time is always passed in: ``T0`` plus offsets, never the wall clock, never a sleep.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from callgate_rules.errors import LeaseLost, OperationIdReused, StoreError
from callgate_rules.store import (
    ClaimOutcome,
    NewOperation,
    NewReviewItem,
    ReceiptState,
    ReceiptStore,
    ReviewStatus,
)
from callgate_rules.taxonomy import ErrorClass

T0 = datetime(2031, 3, 14, 9, 26, 53, 589793, tzinfo=UTC)
LEASE = timedelta(seconds=30)
ARGUMENTS = {
    "customer": {"id": "C-1001", "name": "Zoë Ångström", "tags": ["vip", "北京"]},
    "amount": {"value": 12.5, "currency": "EUR"},
    "lines": [{"sku": "A-1", "qty": 2}, {"sku": "B-2", "qty": 1, "note": None}],
    "express": True,
}
ACTOR = {"user_id": "u-7", "roles": ["agent"], "tenant": "acme"}


def operation(
    operation_id: str = "op-1",
    *,
    args_hash: str = "hash-a",
    arguments: dict[str, Any] | None = None,
) -> NewOperation:
    return NewOperation(
        operation_id=operation_id,
        request_id="req-1",
        tool="refund_order",
        contract_version="2024-06-01",
        args_hash=args_hash,
        arguments=ARGUMENTS if arguments is None else arguments,
        actor=ACTOR,
    )


def finished(
    store: ReceiptStore,
    state: ReceiptState,
    *,
    operation_id: str = "op-1",
    now: datetime = T0,
    result: Any = None,
    error_class: str | None = None,
) -> None:
    store.claim(operation(operation_id), worker="w1", lease=LEASE, now=now)
    store.finish(
        operation_id,
        worker="w1",
        state=state,
        now=now,
        result=result,
        error_class=error_class,
    )


# Claims ------------------------------------------------------------------------------------


def test_first_claim_holds_the_lease(store: ReceiptStore) -> None:
    claim = store.claim(operation(), worker="w1", lease=LEASE, now=T0)

    assert claim.outcome is ClaimOutcome.CLAIMED
    assert claim.may_execute
    receipt = claim.receipt
    assert receipt.state is ReceiptState.CLAIMED
    assert (receipt.lease_owner, receipt.lease_expires_at) == ("w1", T0 + LEASE)
    assert receipt.attempts == 1
    assert (receipt.created_at, receipt.updated_at) == (T0, T0)
    assert receipt.arguments == ARGUMENTS
    assert receipt.actor == ACTOR
    assert (receipt.tool, receipt.request_id, receipt.contract_version) == (
        "refund_order", "req-1", "2024-06-01",
    )
    assert store.get("op-1") == receipt


def test_claim_while_the_lease_is_live_is_busy(store: ReceiptStore) -> None:
    first = store.claim(operation(), worker="w1", lease=LEASE, now=T0)

    almost_expired = T0 + LEASE - timedelta(microseconds=1)
    second = store.claim(operation(), worker="w2", lease=LEASE, now=almost_expired)

    assert second.outcome is ClaimOutcome.BUSY
    assert not second.may_execute
    assert second.receipt == first.receipt
    assert store.get("op-1") == first.receipt


def test_get_of_an_unknown_operation_is_none(store: ReceiptStore) -> None:
    assert store.get("never-seen") is None


@pytest.mark.parametrize(
    "result",
    [
        {"refund": {"id": "R-9", "amount": 12.5, "lines": [1, 2.25, None, True, "ünïcødé ✓"]}},
        ["a", {"b": [[], {}]}, -3, 1e-7],
        "OK — ☃",
        0,
    ],
    ids=["nested-object", "nested-list", "string", "zero"],
)
def test_claim_after_success_returns_the_original_result(
    store: ReceiptStore, result: Any
) -> None:
    finished(store, ReceiptState.SUCCEEDED, result=result)

    later = store.claim(operation(), worker="w2", lease=LEASE, now=T0 + timedelta(days=3))

    assert later.outcome is ClaimOutcome.EXISTING
    assert not later.may_execute
    assert later.receipt.state is ReceiptState.SUCCEEDED
    assert later.receipt.result == result
    assert type(later.receipt.result) is type(result)
    assert later.receipt.lease_owner is None and later.receipt.lease_expires_at is None


@pytest.mark.parametrize(
    "state", [ReceiptState.CLAIMED, ReceiptState.SUCCEEDED, ReceiptState.AWAITING_CONFIRMATION]
)
def test_an_operation_id_cannot_be_reused_for_other_arguments(
    store: ReceiptStore, state: ReceiptState
) -> None:
    if state is ReceiptState.AWAITING_CONFIRMATION:
        store.hold_for_confirmation(operation(), expires_at=T0 + LEASE, now=T0)
    else:
        store.claim(operation(), worker="w1", lease=LEASE, now=T0)
        if state is ReceiptState.SUCCEEDED:
            store.finish("op-1", worker="w1", state=state, now=T0, result={"ok": True})
    before = store.get("op-1")
    reused = operation(args_hash="hash-b", arguments={"amount": 1_000_000})

    with pytest.raises(OperationIdReused, match="op-1"):
        store.claim(reused, worker="w2", lease=LEASE, now=T0 + timedelta(hours=1))
    with pytest.raises(OperationIdReused, match="op-1"):
        store.hold_for_confirmation(reused, expires_at=T0 + LEASE, now=T0)

    assert store.get("op-1") == before


def test_expired_lease_is_taken_over_for_reconciliation(store: ReceiptStore) -> None:
    store.claim(operation(), worker="w1", lease=LEASE, now=T0)

    takeover = store.claim(operation(), worker="w2", lease=LEASE, now=T0 + LEASE)

    assert takeover.outcome is ClaimOutcome.RECONCILE
    assert not takeover.may_execute
    assert takeover.receipt.state is ReceiptState.CLAIMED
    assert takeover.receipt.attempts == 2
    assert takeover.receipt.lease_owner == "w2"
    assert takeover.receipt.lease_expires_at == T0 + 2 * LEASE


def test_old_worker_is_fenced_off_after_a_takeover(store: ReceiptStore) -> None:
    store.claim(operation(), worker="w1", lease=LEASE, now=T0)
    store.claim(operation(), worker="w2", lease=LEASE, now=T0 + 2 * LEASE)

    with pytest.raises(LeaseLost):
        store.finish("op-1", worker="w1", state=ReceiptState.SUCCEEDED, now=T0 + 2 * LEASE)
    with pytest.raises(LeaseLost):
        store.renew("op-1", worker="w1", lease=LEASE, now=T0 + 2 * LEASE)

    done = store.finish(
        "op-1", worker="w2", state=ReceiptState.SUCCEEDED, now=T0 + 2 * LEASE, result="ok"
    )
    assert (done.state, done.result, done.attempts) == (ReceiptState.SUCCEEDED, "ok", 2)


def test_late_finish_is_recorded_while_nobody_took_over(store: ReceiptStore) -> None:
    store.claim(operation(), worker="w1", lease=LEASE, now=T0)

    late = store.finish(
        "op-1", worker="w1", state=ReceiptState.SUCCEEDED, now=T0 + 3 * LEASE, result=[1]
    )

    assert (late.state, late.result) == (ReceiptState.SUCCEEDED, [1])
    again = store.claim(operation(), worker="w2", lease=LEASE, now=T0 + 4 * LEASE)
    assert again.outcome is ClaimOutcome.EXISTING


def test_outcome_unknown_must_be_reconciled(store: ReceiptStore) -> None:
    store.claim(operation(), worker="w1", lease=LEASE, now=T0)
    store.finish(
        "op-1",
        worker="w1",
        state=ReceiptState.OUTCOME_UNKNOWN,
        now=T0,
        error_class="unknown_outcome",
        detail="read timeout after sending",
    )

    claim = store.claim(operation(), worker="w2", lease=LEASE, now=T0 + timedelta(seconds=1))

    assert claim.outcome is ClaimOutcome.RECONCILE
    assert not claim.may_execute
    assert (claim.receipt.attempts, claim.receipt.lease_owner) == (2, "w2")
    assert claim.receipt.detail == "read timeout after sending"


@pytest.mark.parametrize("transient", ["transient", ErrorClass.TRANSIENT], ids=["str", "enum"])
def test_transient_failure_may_be_retried(store: ReceiptStore, transient: str) -> None:
    finished(store, ReceiptState.FAILED, error_class=transient)

    claim = store.claim(operation(), worker="w2", lease=LEASE, now=T0 + timedelta(seconds=5))

    assert claim.outcome is ClaimOutcome.RETRY
    assert claim.may_execute
    assert claim.receipt.state is ReceiptState.CLAIMED
    assert (claim.receipt.attempts, claim.receipt.lease_owner) == (2, "w2")
    assert claim.receipt.error_class == "transient"


@pytest.mark.parametrize("error_class", ["permanent", "conflict", "forbidden"])
def test_other_failures_are_final(store: ReceiptStore, error_class: str) -> None:
    finished(store, ReceiptState.FAILED, error_class=error_class)

    claim = store.claim(operation(), worker="w2", lease=LEASE, now=T0 + timedelta(days=1))

    assert claim.outcome is ClaimOutcome.EXISTING
    assert not claim.may_execute
    assert (claim.receipt.state, claim.receipt.error_class) == (ReceiptState.FAILED, error_class)
    assert claim.receipt.attempts == 1


def test_finish_accepts_only_outcome_states(store: ReceiptStore) -> None:
    store.claim(operation(), worker="w1", lease=LEASE, now=T0)

    with pytest.raises(ValueError, match="in_review"):
        store.finish("op-1", worker="w1", state=ReceiptState.IN_REVIEW, now=T0)

    assert store.get("op-1") is not None
    assert store.get("op-1").state is ReceiptState.CLAIMED  # type: ignore[union-attr]


def test_finish_of_an_unknown_operation_is_lease_lost(store: ReceiptStore) -> None:
    with pytest.raises(LeaseLost):
        store.finish("never-claimed", worker="w1", state=ReceiptState.SUCCEEDED, now=T0)


# Renewal -----------------------------------------------------------------------------------


def test_renew_extends_the_lease(store: ReceiptStore) -> None:
    store.claim(operation(), worker="w1", lease=LEASE, now=T0)

    renewed = store.renew("op-1", worker="w1", lease=LEASE, now=T0 + timedelta(seconds=20))

    assert renewed.lease_expires_at == T0 + timedelta(seconds=50)
    assert renewed.updated_at == T0 + timedelta(seconds=20)
    assert renewed.attempts == 1
    still_busy = store.claim(operation(), worker="w2", lease=LEASE, now=T0 + timedelta(seconds=40))
    assert still_busy.outcome is ClaimOutcome.BUSY


def test_renew_by_another_worker_or_after_finish_is_lease_lost(store: ReceiptStore) -> None:
    store.claim(operation(), worker="w1", lease=LEASE, now=T0)

    with pytest.raises(LeaseLost):
        store.renew("op-1", worker="w2", lease=LEASE, now=T0)
    store.finish("op-1", worker="w1", state=ReceiptState.SUCCEEDED, now=T0)
    with pytest.raises(LeaseLost):
        store.renew("op-1", worker="w1", lease=LEASE, now=T0)
    with pytest.raises(LeaseLost):
        store.renew("never-claimed", worker="w1", lease=LEASE, now=T0)


# Confirmation ------------------------------------------------------------------------------


def test_hold_for_confirmation_waits_without_a_lease(store: ReceiptStore) -> None:
    expires = T0 + timedelta(minutes=15)

    held = store.hold_for_confirmation(operation(), expires_at=expires, now=T0)

    assert held.state is ReceiptState.AWAITING_CONFIRMATION
    assert held.confirmation_expires_at == expires
    assert (held.lease_owner, held.lease_expires_at, held.attempts) == (None, None, 0)
    again = store.hold_for_confirmation(operation(), expires_at=expires + LEASE, now=T0 + LEASE)
    assert again == held
    plain_claim = store.claim(operation(), worker="w1", lease=LEASE, now=T0)
    assert plain_claim.outcome is ClaimOutcome.EXISTING
    assert store.get("op-1") == held


def test_claim_confirmed_records_who_confirmed_and_when(store: ReceiptStore) -> None:
    store.hold_for_confirmation(operation(), expires_at=T0 + timedelta(minutes=15), now=T0)
    confirmed_at = T0 + timedelta(minutes=2)

    claim = store.claim_confirmed(
        "op-1", confirmed_by="alice@example.com", worker="w1", lease=LEASE, now=confirmed_at
    )

    assert claim.outcome is ClaimOutcome.CLAIMED
    assert claim.may_execute
    receipt = claim.receipt
    assert receipt.state is ReceiptState.CLAIMED
    assert (receipt.confirmed_by, receipt.confirmed_at) == ("alice@example.com", confirmed_at)
    assert (receipt.lease_owner, receipt.lease_expires_at) == ("w1", confirmed_at + LEASE)
    assert receipt.attempts == 1
    assert store.get("op-1") == receipt


def test_replayed_confirmation_never_executes_twice(store: ReceiptStore) -> None:
    store.hold_for_confirmation(operation(), expires_at=T0 + timedelta(minutes=15), now=T0)
    first = store.claim_confirmed("op-1", confirmed_by="alice", worker="w1", lease=LEASE, now=T0)

    replay_while_running = store.claim_confirmed(
        "op-1", confirmed_by="mallory", worker="w2", lease=LEASE, now=T0
    )
    store.finish("op-1", worker="w1", state=ReceiptState.SUCCEEDED, now=T0, result={"id": 1})
    replay_after_success = store.claim_confirmed(
        "op-1", confirmed_by="mallory", worker="w2", lease=LEASE, now=T0 + LEASE
    )

    assert replay_while_running.outcome is ClaimOutcome.BUSY
    assert replay_while_running.receipt == first.receipt
    assert replay_after_success.outcome is ClaimOutcome.EXISTING
    assert not replay_while_running.may_execute and not replay_after_success.may_execute
    assert replay_after_success.receipt.confirmed_by == "alice"
    assert replay_after_success.receipt.result == {"id": 1}


def test_claim_confirmed_of_an_unknown_operation_fails(store: ReceiptStore) -> None:
    with pytest.raises(StoreError, match="never-held"):
        store.claim_confirmed("never-held", confirmed_by="a", worker="w1", lease=LEASE, now=T0)


# Review queue ------------------------------------------------------------------------------


def review_item(
    operation_id: str | None = "op-1", summary: str = "refund may have gone out"
) -> NewReviewItem:
    return NewReviewItem(
        tool="refund_order",
        reason="unknown_outcome",
        summary=summary,
        operation_id=operation_id,
        payload={"decision": {"route": "review"}, "masked": "C-****"},
    )


def test_open_review_moves_the_receipt_to_in_review(store: ReceiptStore) -> None:
    store.claim(operation(), worker="w1", lease=LEASE, now=T0)

    item = store.open_review(review_item(), now=T0 + timedelta(seconds=1))

    assert item.status is ReviewStatus.OPEN
    assert item.created_at == T0 + timedelta(seconds=1)
    assert (item.tool, item.reason) == ("refund_order", "unknown_outcome")
    assert item.operation_id == "op-1"
    assert item.payload == {"decision": {"route": "review"}, "masked": "C-****"}
    assert (item.taken_by, item.resolution, item.resolved_at) == (None, None, None)
    receipt = store.get("op-1")
    assert receipt is not None and receipt.state is ReceiptState.IN_REVIEW
    assert receipt.lease_owner is None
    with pytest.raises(LeaseLost):
        store.finish("op-1", worker="w1", state=ReceiptState.SUCCEEDED, now=T0)
    waiting = store.claim(operation(), worker="w2", lease=LEASE, now=T0 + timedelta(days=1))
    assert waiting.outcome is ClaimOutcome.EXISTING


def test_list_reviews_in_queue_order_filtered_by_status(store: ReceiptStore) -> None:
    first = store.open_review(review_item(None, "first"), now=T0)
    second = store.open_review(review_item(None, "second"), now=T0)
    third = store.open_review(review_item(None, "third"), now=T0 + timedelta(seconds=1))
    store.take_review(reviewer="bob", now=T0 + timedelta(minutes=1))

    everything = store.list_reviews()
    still_open = store.list_reviews(status=ReviewStatus.OPEN)
    taken = store.list_reviews(status=ReviewStatus.TAKEN)

    assert [item.review_id for item in everything] == [
        first.review_id, second.review_id, third.review_id,
    ]
    assert [item.review_id for item in still_open] == [second.review_id, third.review_id]
    assert [item.review_id for item in taken] == [first.review_id]
    assert store.list_reviews(status=ReviewStatus.RESOLVED) == []


def test_take_review_gives_the_oldest_open_item_once(store: ReceiptStore) -> None:
    newer = store.open_review(review_item(None, "newer"), now=T0 + timedelta(seconds=5))
    older = store.open_review(review_item(None, "older"), now=T0)

    got_first = store.take_review(reviewer="bob", now=T0 + timedelta(minutes=1))
    got_second = store.take_review(reviewer="carol", now=T0 + timedelta(minutes=2))
    got_third = store.take_review(reviewer="dave", now=T0 + timedelta(minutes=3))

    assert got_first is not None and got_second is not None
    assert got_first.review_id == older.review_id
    assert got_second.review_id == newer.review_id
    assert got_third is None
    assert got_first.status is ReviewStatus.TAKEN
    assert (got_first.taken_by, got_first.taken_at) == ("bob", T0 + timedelta(minutes=1))


def test_concurrent_reviewers_never_take_the_same_item(store: ReceiptStore) -> None:
    opened = {
        store.open_review(review_item(None, f"item {n}"), now=T0).review_id for n in range(40)
    }
    taken_by_thread: list[list[str]] = [[] for _ in range(6)]
    start = threading.Barrier(len(taken_by_thread))

    def reviewer(index: int) -> None:
        start.wait()
        while (item := store.take_review(reviewer=f"r{index}", now=T0)) is not None:
            taken_by_thread[index].append(item.review_id)

    threads = [threading.Thread(target=reviewer, args=(n,)) for n in range(len(taken_by_thread))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    every_take = [review_id for taken in taken_by_thread for review_id in taken]
    assert sorted(every_take) == sorted(opened)
    assert store.list_reviews(status=ReviewStatus.OPEN) == []


@pytest.mark.parametrize("resolution", ["succeeded", "failed"])
def test_resolve_review_settles_item_and_receipt(store: ReceiptStore, resolution: str) -> None:
    store.claim(operation(), worker="w1", lease=LEASE, now=T0)
    store.finish("op-1", worker="w1", state=ReceiptState.OUTCOME_UNKNOWN, now=T0)
    opened = store.open_review(review_item(), now=T0)
    store.take_review(reviewer="bob", now=T0 + timedelta(minutes=1))
    resolved_at = T0 + timedelta(minutes=9)

    resolved = store.resolve_review(
        opened.review_id, resolution=resolution, note="checked the ledger", by="bob",
        now=resolved_at,
    )

    assert resolved.status is ReviewStatus.RESOLVED
    assert (resolved.resolution, resolved.note) == (resolution, "checked the ledger")
    assert (resolved.resolved_by, resolved.resolved_at) == ("bob", resolved_at)
    assert resolved.taken_by == "bob"
    receipt = store.get("op-1")
    assert receipt is not None
    assert receipt.state is ReceiptState(resolution)
    assert receipt.updated_at == resolved_at
    after = store.claim(operation(), worker="w2", lease=LEASE, now=resolved_at + LEASE)
    assert after.outcome is ClaimOutcome.EXISTING
    assert store.take_review(reviewer="carol", now=resolved_at) is None


def test_resolve_review_refuses_bad_input(store: ReceiptStore) -> None:
    opened = store.open_review(review_item(None), now=T0)

    with pytest.raises(ValueError, match="maybe"):
        store.resolve_review(opened.review_id, resolution="maybe", note="", by="bob", now=T0)
    with pytest.raises(StoreError, match="no-such-review"):
        store.resolve_review("no-such-review", resolution="failed", note="", by="bob", now=T0)
    store.resolve_review(opened.review_id, resolution="failed", note="", by="bob", now=T0)
    with pytest.raises(StoreError, match="already resolved"):
        store.resolve_review(opened.review_id, resolution="succeeded", note="", by="eve", now=T0)


# Housekeeping ------------------------------------------------------------------------------


def test_purge_removes_only_old_finished_work(store: ReceiptStore) -> None:
    old, cutoff, recent = T0, T0 + timedelta(days=30), T0 + timedelta(days=31)
    finished(store, ReceiptState.SUCCEEDED, operation_id="old-succeeded", now=old)
    finished(store, ReceiptState.FAILED, operation_id="old-failed", now=old,
             error_class="permanent")
    finished(store, ReceiptState.SUCCEEDED, operation_id="recent-succeeded", now=recent)
    finished(store, ReceiptState.OUTCOME_UNKNOWN, operation_id="old-unknown", now=old)
    store.claim(operation("old-claimed"), worker="w1", lease=LEASE, now=old)
    store.hold_for_confirmation(operation("old-awaiting"), expires_at=old + LEASE, now=old)
    finished(store, ReceiptState.OUTCOME_UNKNOWN, operation_id="old-in-review", now=old)
    store.open_review(review_item("old-in-review"), now=old)
    old_resolved = store.open_review(review_item(None, "old resolved"), now=old)
    store.resolve_review(old_resolved.review_id, resolution="failed", note="", by="b", now=old)
    recent_resolved = store.open_review(review_item(None, "recent resolved"), now=old)
    store.resolve_review(
        recent_resolved.review_id, resolution="failed", note="", by="b", now=recent
    )
    old_taken = store.open_review(review_item(None, "old taken"), now=old)
    store.take_review(reviewer="b", now=old)

    purged = store.purge(older_than=cutoff)

    assert purged == 3
    assert store.get("old-succeeded") is None
    assert store.get("old-failed") is None
    for kept in ("recent-succeeded", "old-unknown", "old-claimed", "old-awaiting",
                 "old-in-review"):
        assert store.get(kept) is not None, kept
    remaining = {item.summary for item in store.list_reviews()}
    assert remaining == {"refund may have gone out", "recent resolved", "old taken"}
    assert old_taken.review_id in {item.review_id for item in store.list_reviews()}
    assert store.purge(older_than=cutoff) == 0


# Time and values ---------------------------------------------------------------------------


def test_timestamps_come_back_as_aware_utc(store: ReceiptStore) -> None:
    kolkata = timezone(timedelta(hours=5, minutes=30))
    local_now = T0.astimezone(kolkata)
    store.hold_for_confirmation(operation(), expires_at=local_now + LEASE, now=local_now)
    store.claim_confirmed("op-1", confirmed_by="a", worker="w1", lease=LEASE, now=local_now)
    item = store.open_review(review_item(None), now=local_now)

    receipt = store.get("op-1")
    taken = store.take_review(reviewer="b", now=local_now)

    assert receipt is not None and taken is not None
    moments = [
        receipt.created_at, receipt.updated_at, receipt.confirmed_at,
        receipt.confirmation_expires_at, receipt.lease_expires_at, item.created_at,
        taken.taken_at,
    ]
    for moment in moments:
        assert moment is not None
        assert moment.utcoffset() == timedelta(0)
    assert receipt.created_at == T0 and receipt.created_at.microsecond == T0.microsecond
    assert receipt.lease_expires_at == T0 + LEASE


def test_naive_datetimes_are_refused(store: ReceiptStore) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        store.claim(operation(), worker="w1", lease=LEASE, now=datetime(2031, 1, 1))
    assert store.get("op-1") is None


def test_stored_values_are_copies(store: ReceiptStore) -> None:
    arguments = {"items": [1, 2], "meta": {"k": "v"}}
    claim = store.claim(operation(arguments=arguments), worker="w1", lease=LEASE, now=T0)

    arguments["items"].append(3)
    claim.receipt.arguments["meta"]["k"] = "changed"

    stored = store.get("op-1")
    assert stored is not None and stored.arguments == {"items": [1, 2], "meta": {"k": "v"}}


def test_concurrent_claims_from_threads_elect_one_executor(store: ReceiptStore) -> None:
    outcomes: list[ClaimOutcome] = []
    outcomes_lock = threading.Lock()
    start = threading.Barrier(8)

    def contender(index: int) -> None:
        start.wait()
        claim = store.claim(operation(), worker=f"w{index}", lease=LEASE, now=T0)
        with outcomes_lock:
            outcomes.append(claim.outcome)

    threads = [threading.Thread(target=contender, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert sorted(outcomes) == sorted([ClaimOutcome.CLAIMED] + [ClaimOutcome.BUSY] * 7)


def test_a_closed_store_refuses_work(store: ReceiptStore) -> None:
    store.close()

    with pytest.raises(StoreError):
        store.claim(operation(), worker="w1", lease=LEASE, now=T0)
