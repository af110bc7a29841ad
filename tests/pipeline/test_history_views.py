"""A process's view of a run (``pipeline.history.RunViews``): read once, then only what
changed, and always what the store would read whole.

The view is held to ``run_history`` itself: after any sequence of entries written (in any
order of ``at``), held writes marked executed, purges and reads with a moving retention,
by this instance or another one on the same store (two ``SqliteStore`` objects on one
file; two ``PostgresStore`` objects on one schema), it reads the same entries and makes
the same ``history`` as a whole read. On PostgreSQL an entry whose transaction commits
after a later entry's is still seen. Memory stays bounded.
"""

from __future__ import annotations

import gc
import os
import uuid
import weakref
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from callgate_rules.pipeline import history as history_module
from callgate_rules.pipeline.history import RunViews, run_history_now, variable
from callgate_rules.store import MemoryStore, SqliteStore
from callgate_rules.store.history import HistoryEntry, HistoryStatements, RunHistory

T0 = datetime(2026, 12, 1, 9, tzinfo=UTC)
POSTGRES_URL = os.environ.get("CALLGATE_TEST_POSTGRES_URL")


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def two_instances(request: pytest.FixtureRequest,
                  tmp_path: Path) -> Iterator[tuple[RunHistory, RunHistory]]:
    """A reader and a writer on one store: the same object in memory, two store objects
    (two instances) on SQLite and PostgreSQL."""
    if request.param == "memory":
        store = MemoryStore()
        yield store, store
        return
    if request.param == "sqlite":
        reader, writer = (SqliteStore(tmp_path / "history.db"),
                          SqliteStore(tmp_path / "history.db"))
        yield reader, writer
        reader.close()
        writer.close()
        return
    if not POSTGRES_URL:
        pytest.skip("CALLGATE_TEST_POSTGRES_URL is not set")
    import psycopg

    from callgate_rules.store import PostgresStore

    schema = f"callgate_views_{uuid.uuid4().hex[:10]}"
    reader, writer = (PostgresStore(POSTGRES_URL, schema=schema),
                      PostgresStore(POSTGRES_URL, schema=schema))
    yield reader, writer
    reader.close()
    writer.close()
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def entry(number: int, second: int, *, operation: str | None = None,
          route: str = "return_result", run_id: str = "run") -> HistoryEntry:
    return HistoryEntry(run_id=run_id, at=T0 + timedelta(seconds=second), tool="sendMoney",
                        arguments={"amount": number, "recipient": f"R{number % 3}"},
                        route=route, error_class="confirmation_required"
                        if operation else None, request_id=f"r{number}",
                        operation_id=operation, executed=operation is None)


def agrees(reader: RunHistory, run_id: str, since: datetime) -> None:
    """The view reads what the store reads whole, and makes the same ``history``."""
    entries, elements = run_history_now(reader, run_id, since)
    whole = reader.run_history(run_id, since=since)
    assert list(entries) == whole
    assert elements == variable(whole)


# write, hold (an entry of a write waiting for a person), execute (mark the n-th held one),
# purge (before a second), read (with the retention starting at a second)
OPERATIONS = st.lists(st.one_of(
    st.tuples(st.just("write"), st.integers(0, 40)),
    st.tuples(st.just("hold"), st.integers(0, 40)),
    st.tuples(st.just("approval"), st.integers(0, 40)),
    st.tuples(st.just("execute"), st.integers(0, 5)),
    st.tuples(st.just("purge"), st.integers(0, 20)),
    st.tuples(st.just("read"), st.integers(0, 30))), max_size=30)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(operations=OPERATIONS)
def test_the_view_reads_what_the_store_reads_whole(
        two_instances: tuple[RunHistory, RunHistory],
        operations: list[tuple[str, int]]) -> None:
    reader, writer = two_instances
    run_id = f"run-{uuid.uuid4().hex}"  # one run per example, on the same store
    held: list[str] = []
    for number, (operation, value) in enumerate(operations):
        if operation == "write":
            writer.record_history(entry(number, value, run_id=run_id))
        elif operation in ("hold", "approval"):
            held.append(f"{run_id}-op-{number}")
            writer.record_history(entry(number, value, operation=held[-1], run_id=run_id,
                                        route="approval" if operation == "approval"
                                        else "await_confirmation"))
        elif operation == "execute" and held:
            writer.mark_executed(held[value % len(held)], at=T0 + timedelta(minutes=5),
                                 route="return_result", result={"id": number})
        elif operation == "purge":
            writer.purge_history(older_than=T0 + timedelta(seconds=value))
        agrees(reader, run_id, T0 + timedelta(seconds=value if operation == "read" else 0))
    agrees(reader, run_id, T0)


def test_a_run_longer_than_the_limit_is_judged_on_its_tail(
        two_instances: tuple[RunHistory, RunHistory], monkeypatch: pytest.MonkeyPatch) -> None:
    reader, writer = two_instances
    monkeypatch.setattr(history_module, "HISTORY_LIMIT", 5)
    for number in range(8):
        writer.record_history(entry(number, 10 + number))
    assert request_ids(reader) == [f"r{number}" for number in range(3, 8)]
    writer.record_history(entry(8, 30))  # the newest
    writer.record_history(entry(9, 1))  # older than the tail: not in it
    writer.record_history(entry(10, 14))  # in the tail's middle
    entries, elements = run_history_now(reader, "run", T0)
    assert [found.request_id for found in entries] == ["r10", "r5", "r6", "r7", "r8"]
    assert list(entries) == reader.run_history("run", since=T0, limit=5)
    assert elements == variable(entries)


def test_a_held_write_executed_by_another_instance_is_seen(
        two_instances: tuple[RunHistory, RunHistory]) -> None:
    reader, writer = two_instances
    writer.record_history(entry(1, 1, operation="op-1", route="await_confirmation"))
    assert run_history_now(reader, "run", T0)[1][0]["executed"] is False
    assert writer.mark_executed("op-1", at=T0 + timedelta(minutes=1), route="return_result",
                                result={"id": "tx-1"}) == 1
    (element,) = run_history_now(reader, "run", T0)[1]
    assert element["executed"] is True and element["error_class"] == ""
    assert element["result"] == {"id": "tx-1"}


def test_what_a_read_handed_out_is_never_changed_and_read_again_for_nothing(
        two_instances: tuple[RunHistory, RunHistory]) -> None:
    reader, writer = two_instances
    writer.record_history(entry(1, 1, operation="op-1", route="await_confirmation"))
    entries, elements = run_history_now(reader, "run", T0)
    assert run_history_now(reader, "run", T0) == (entries, elements)
    assert run_history_now(reader, "run", T0)[1] is elements  # nothing new: not even a copy
    writer.record_history(entry(2, 2))
    writer.mark_executed("op-1", at=T0, route="return_result")
    now_entries, now_elements = run_history_now(reader, "run", T0)
    assert [found.request_id for found in entries] == ["r1"]
    assert [element["executed"] for element in elements] == [False]
    assert [element["executed"] for element in now_elements] == [True, True]
    assert len(now_entries) == 2


def test_an_entry_committed_after_a_later_one_is_still_seen_on_postgres() -> None:
    """Positions are handed out when rows are written, not when they commit: a reader that
    saw position p + 1 must still see p once its transaction commits."""
    if not POSTGRES_URL:
        pytest.skip("CALLGATE_TEST_POSTGRES_URL is not set")
    import psycopg

    from callgate_rules.store import PostgresStore
    from callgate_rules.store.postgres import POSTGRES
    from callgate_rules.store.statements import execute

    schema = f"callgate_views_{uuid.uuid4().hex[:10]}"
    reader = PostgresStore(POSTGRES_URL, schema=schema)
    writer = PostgresStore(POSTGRES_URL, schema=schema)
    insert = HistoryStatements.of(POSTGRES).insert
    try:
        assert run_history_now(reader, "run", T0) == ([], [])
        with psycopg.connect(POSTGRES_URL) as slow:  # a transaction of its own
            slow.execute(f'SET search_path TO "{schema}"')
            late = entry(1, 3)  # decided last: no purge check can notice it missing
            execute(slow.cursor(), insert, late_parameters(late))  # position 1, not committed
            writer.record_history(entry(2, 2))  # position 2, committed
            assert request_ids(reader) == ["r2"]
            slow.commit()
        assert request_ids(reader) == ["r2", "r1"]
    finally:
        reader.close()
        writer.close()
        with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
            connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def request_ids(reader: RunHistory) -> list[str]:
    return [found.request_id for found in run_history_now(reader, "run", T0)[0]]


def late_parameters(written: HistoryEntry) -> dict[str, Any]:
    return {"run_id": written.run_id, "at": written.at, "tool": written.tool,
            "arguments": '{"amount": 1, "recipient": "R1"}', "route": written.route,
            "error_class": None, "request_id": written.request_id, "operation_id": None,
            "executed": True, "executed_at": None, "result": None}


def test_the_views_forget_the_runs_read_longest_ago(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(history_module, "VIEWED_ENTRIES", 10)
    store = MemoryStore()
    for run in range(5):
        for number in range(4):
            store.record_history(entry(number, number, run_id=f"run-{run}"))
    for run in range(5):
        run_history_now(store, f"run-{run}", T0)
    views = RunViews.for_store(store)
    assert list(views.runs) == ["run-3", "run-4"]
    assert views.viewed == 8
    assert len(run_history_now(store, "run-0", T0)[0]) == 4  # forgotten: read afresh
    assert list(views.runs) == ["run-4", "run-0"]


def test_a_store_that_is_gone_takes_its_views_with_it() -> None:
    store = MemoryStore()
    store.record_history(entry(1, 1))
    run_history_now(store, "run", T0)
    views = weakref.ref(RunViews.for_store(store))
    del store
    gc.collect()
    assert views() is None


class Wrapped:
    """A store wrapper that hands every call on, as the service's timing wrapper does."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def test_a_wrapper_that_hands_calls_on_is_read_as_its_store() -> None:
    store = MemoryStore()
    wrapped: Any = Wrapped(store)
    store.record_history(entry(1, 1))
    assert request_ids(wrapped) == ["r1"]
    assert RunViews.for_store(wrapped).feeds
    store.record_history(entry(2, 2))
    assert request_ids(wrapped) == ["r1", "r2"]
