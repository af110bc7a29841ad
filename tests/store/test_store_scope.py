"""A caller's scope, filtered in every store's own query (``store.scoping``): the pending
receipts, the review queue and the next item to take are exactly those ``Scope.admits``,
on the memory store, SQLite (with and without RETURNING) and PostgreSQL."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from callgate_rules.store import NewOperation, ReceiptState, ReceiptStore
from callgate_rules.store.base import NewReviewItem, ReviewStatus
from callgate_rules.store.scoping import NOTHING, Scope, pinned_scope

T0 = datetime(2026, 11, 29, 12, tzinfo=UTC)
TENANTS = ["acme", "globex", "initech"]
TOOLS = ["sendPayment", "sendEmail"]

actor_values = st.one_of(st.sampled_from(TENANTS), st.integers(0, 2), st.booleans(),
                         st.none(), st.lists(st.sampled_from(TENANTS), max_size=1))
actors = st.dictionaries(st.sampled_from(["tenant", "role"]), actor_values, max_size=2)
scopes = st.builds(
    Scope,
    st.dictionaries(st.sampled_from(["tenant", "role"]),
                    st.frozensets(st.sampled_from(TENANTS), max_size=2), max_size=2),
    st.one_of(st.none(), st.frozensets(st.sampled_from(TOOLS), max_size=2)))


def held(store: ReceiptStore, tool: str, actor: dict[str, Any]) -> str:
    operation = f"op-{uuid.uuid4().hex}"
    store.hold_for_confirmation(NewOperation(
        operation_id=operation, request_id="r", tool=tool, contract_version="1",
        args_hash=uuid.uuid4().hex, arguments={}, actor=actor),
        expires_at=T0 + timedelta(minutes=10), now=T0)
    return operation


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(writes=st.lists(st.tuples(st.sampled_from(TOOLS), actors), min_size=1, max_size=6),
       scope=scopes)
def test_listings_are_exactly_what_the_scope_admits(
        store: ReceiptStore, writes: list[tuple[str, dict[str, Any]]], scope: Scope) -> None:
    mine = {held(store, tool, actor): (tool, actor) for tool, actor in writes}
    listed = [r.operation_id for r in store.list_receipts(
        state=ReceiptState.AWAITING_CONFIRMATION, limit=100_000, scope=scope)
        if r.operation_id in mine]
    assert sorted(listed) == sorted(operation for operation, (tool, actor) in mine.items()
                                    if scope.admits(tool, actor))
    for operation, (tool, _) in mine.items():
        store.open_review(NewReviewItem(tool=tool, reason="unknown_outcome", summary="s",
                                        operation_id=operation), now=T0)
    reviews = [i.operation_id for i in store.list_reviews(scope=scope)
               if i.operation_id in mine]
    assert sorted(reviews) == sorted(operation for operation, (tool, actor) in mine.items()
                                     if scope.admits(tool, actor))


def test_take_review_takes_only_in_scope(store: ReceiptStore) -> None:
    acme = held(store, "sendPayment", {"tenant": "acme"})
    globex = held(store, "sendPayment", {"tenant": "globex"})
    for operation in (globex, acme):  # globex's is older: first in the queue
        store.open_review(NewReviewItem(tool="sendPayment", reason="unknown_outcome",
                                        summary="s", operation_id=operation), now=T0)
    # an item without a receipt: its payload's actor decides
    store.open_review(NewReviewItem(tool="getInvoice", reason="budget_exhausted", summary="r",
                                    payload={"actor": {"tenant": "acme"}}), now=T0)
    acme_scope = pinned_scope({"tenant": "acme"})
    assert store.take_review(reviewer="x", now=T0, scope=NOTHING) is None
    first = store.take_review(reviewer="erin", now=T0, scope=acme_scope)
    second = store.take_review(reviewer="erin", now=T0, scope=acme_scope)
    assert first is not None and first.operation_id == acme
    assert second is not None and second.operation_id is None and second.tool == "getInvoice"
    assert store.take_review(reviewer="erin", now=T0, scope=acme_scope) is None
    untouched = store.list_reviews(status=ReviewStatus.OPEN,
                                   scope=pinned_scope({"tenant": "globex"}))
    assert [i.operation_id for i in untouched] == [globex]
    assert store.list_reviews(scope=NOTHING) == []


def test_a_pin_that_is_not_text_admits_nothing() -> None:
    scope = pinned_scope({"tenant": 7})
    assert scope == Scope({"tenant": frozenset()})
    assert not scope.admits("t", {"tenant": 7}) and not scope.admits("t", {"tenant": "7"})
    with pytest.raises(ValueError, match="plain name"):
        Scope({"tenant') OR 1=1 --": frozenset(["x"])})
