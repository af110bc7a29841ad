"""The gate on a real PostgreSQL store: a connection dropped between sending and recording."""

from __future__ import annotations

import os
import random
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import yaml

from callgate_rules import Gate, Route, WorldResolvers
from callgate_rules.documents.compiler import load
from callgate_rules.harness.scenarios import FakeClock
from callgate_rules.harness.simulator import Simulator
from callgate_rules.pipeline.execute import ExecutionRequest
from callgate_rules.store import PostgresStore
from tests.conftest import CONTRACTS, POLICIES, WORLD_FILE

URL = os.environ.get("CALLGATE_TEST_POSTGRES_URL")
pytestmark = pytest.mark.skipif(
    not URL, reason="CALLGATE_TEST_POSTGRES_URL is not set; PostgreSQL gate tests need a "
                    "server (see README)")


@pytest.fixture()
def store() -> Iterator[PostgresStore]:
    import psycopg

    assert URL is not None
    schema = f"callgate_gate_{uuid.uuid4().hex[:10]}"
    separator = "&" if "?" in URL else "?"
    store = PostgresStore(f"{URL}{separator}application_name={schema}", schema=schema)
    yield store
    store.close()
    with psycopg.connect(URL, autocommit=True) as connection:
        connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def drop_store_connections(store: PostgresStore) -> int:
    """Terminate every server connection of the store's pool, as a network failure would."""
    import psycopg

    assert URL is not None
    with psycopg.connect(URL, autocommit=True) as admin:
        rows = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid() "
            "AND application_name = %s", (store.schema,)).fetchall()
    return len(rows)


def test_connection_dropped_between_sending_and_recording(store: PostgresStore) -> None:
    world = yaml.safe_load(WORLD_FILE.read_text())
    actor = {"id": "U-7", "tenant": "acme", "role": "agent"}
    simulator = Simulator(world)
    apply = simulator.executors()["createFollowUp"]
    dropped: list[int] = []

    def create_follow_up(request: ExecutionRequest) -> Any:
        result = apply(request)  # the destination applied the write...
        dropped.append(drop_store_connections(store))  # ...and the database link breaks
        return result

    clock = FakeClock(datetime(2026, 11, 29, 12, tzinfo=UTC))
    gate = Gate(load([CONTRACTS, POLICIES]), resolvers=WorldResolvers(world),
                executors={"createFollowUp": create_follow_up}, finder=simulator.find,
                store=store, clock=clock, sleep=clock.sleep, rng=random.Random(1))
    call = {"name": "createFollowUp", "arguments": {
        "ticketId": "T-1001", "assigneeId": "U-7", "dueAt": "2026-12-15T09:00:00Z"}}
    first = gate.handle(call, actor=actor, request_id="req-1")
    assert dropped and dropped[0] >= 1
    # The pool replaces the dead connection, so the outcome is still recorded...
    assert first.route == Route.RETURN_RESULT
    # ...and the same call again is the earlier receipt, never a second write.
    clock.now += timedelta(minutes=5)
    again = gate.handle(call, actor=actor, request_id="req-1")
    assert again.route == Route.RETURN_RECEIPT
    assert simulator.write_count() == 1
