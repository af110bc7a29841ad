"""Run intents in every store: one row per run, bound by compare-and-set on its version,
so two instances narrowing one run's intent at once never both win; and, on PostgreSQL,
two gates on one database judging one run by one intent (``pipeline.intents``)."""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from callgate_rules import Gate, Route, Run
from callgate_rules.documents.compiler import load
from callgate_rules.harness.world import WorldResolvers
from callgate_rules.pipeline.intents import IntentWidened
from callgate_rules.store import PostgresStore
from callgate_rules.store.base import ReceiptStore
from callgate_rules.store.intents import RunIntents

T0 = datetime(2026, 12, 1, 9, tzinfo=UTC)
REPO = Path(__file__).resolve().parents[2]


def test_the_first_binding_and_each_narrowing_win_once(store: ReceiptStore) -> None:
    assert isinstance(store, RunIntents)
    run_id = f"run-{uuid.uuid4().hex}"
    assert store.run_intent(run_id) is None
    first = {"tools": {"sendMoney": {"calls": 2}}}
    assert store.bind_run_intent(run_id, first, version=1, declared_by="planner", now=T0)
    assert not store.bind_run_intent(run_id, {"tools": {}}, version=1, declared_by="x",
                                     now=T0)  # a second first binding loses
    assert not store.bind_run_intent(run_id, {"tools": {}}, version=3, declared_by="x",
                                     now=T0)  # not over the version it narrows
    narrower = {"tools": {"sendMoney": {"calls": 1}}}
    assert store.bind_run_intent(run_id, narrower, version=2, declared_by="the user",
                                 now=T0 + timedelta(seconds=1))
    kept = store.run_intent(run_id)
    assert kept is not None
    assert (kept.version, kept.intent, kept.declared_by) == (2, narrower, "the user")
    assert kept.declared_at == T0 + timedelta(seconds=1)


def test_purged_with_the_run(store: ReceiptStore) -> None:
    assert isinstance(store, RunIntents)
    old, new = f"old-{uuid.uuid4().hex}", f"new-{uuid.uuid4().hex}"
    store.bind_run_intent(old, {"tools": {}}, version=1, declared_by="p", now=T0)
    store.bind_run_intent(new, {"tools": {}}, version=1, declared_by="p",
                          now=T0 + timedelta(days=2))
    assert store.purge_run_intents(older_than=T0 + timedelta(days=1)) >= 1
    assert store.run_intent(old) is None and store.run_intent(new) is not None


def test_racing_bindings_one_wins(store: ReceiptStore) -> None:
    assert isinstance(store, RunIntents)
    run_id = f"race-{uuid.uuid4().hex}"
    barrier, won = threading.Barrier(8), []

    def bind(index: int) -> None:
        barrier.wait()
        if store.bind_run_intent(run_id, {"tools": {}, "request": str(index)}, version=1,
                                 declared_by=str(index), now=T0):
            won.append(index)

    threads = [threading.Thread(target=bind, args=(index,)) for index in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(won) == 1
    kept = store.run_intent(run_id)
    assert kept is not None and kept.declared_by == str(won[0])


@pytest.mark.integration
def test_two_gates_on_one_postgres_database_judge_by_one_intent(
        postgres_url: str, postgres_schema: str) -> None:
    config = load([REPO / "examples" / "banking" / "contracts",
                   REPO / "examples" / "banking" / "policies",
                   REPO / "examples" / "intents" / "routing.yaml"])
    paid: list[dict[str, Any]] = []
    resolvers = WorldResolvers({"payees": [
        {"id": "p1", "iban": "DE89370400440532013000", "owner": "U-1"}]})

    def gate(store: PostgresStore) -> Gate:
        return Gate(config, store=store, resolvers=resolvers, clock=lambda: T0,
                    executors={"sendMoney": lambda request: paid.append(
                        dict(request.arguments)) or {"ok": True}})

    with PostgresStore(postgres_url, schema=postgres_schema) as one, \
            PostgresStore(postgres_url, schema=postgres_schema) as two:
        first, second = gate(one), gate(two)
        run_id = f"pg-{uuid.uuid4().hex}"
        first.declare_intent(run_id, (REPO / "examples" / "intents" / "pay-the-rent.yaml")
                             .read_text(), declared_by="planner")
        call = {"name": "sendMoney", "arguments": {
            "recipient": "DE89370400440532013000", "amount": 600, "subject": "Rent"}}
        ran = second.handle(call, actor={"id": "U-1", "role": "holder"}, request_id="r1",
                            run=Run(started_at=T0, run_id=run_id))
        assert ran.route == Route.RETURN_RESULT
        more = {**call, "arguments": {**call["arguments"], "amount": 400}}
        held = first.handle(more, actor={"id": "U-1", "role": "holder"}, request_id="r2",
                            run=Run(started_at=T0, run_id=run_id))
        assert held.route == Route.AWAIT_CONFIRMATION
        assert "'paid' would be 1,000 (600 so far and 400 now)" in held.log["detail"]
        assert paid == [call["arguments"]]
        # narrowed on one, the other judges by the narrower one; widening is refused on both
        bound_now = first.intent_of(run_id)
        assert bound_now is not None
        narrower_data = bound_now.intent.as_data()
        narrower_data["tools"]["sendMoney"]["calls"] = 0
        second.declare_intent(run_id, narrower_data, declared_by="the user")
        bound = first.intent_of(run_id)
        assert bound is not None and bound.version == 2
        with pytest.raises(IntentWidened):
            first.declare_intent(run_id, {**narrower_data, "tools": {"sendMoney": {
                **narrower_data["tools"]["sendMoney"], "calls": 1}}},
                declared_by="an injected instruction")
