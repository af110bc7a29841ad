"""Operators' view in library use: a span per decision (OpenTelemetry SDK, in-memory
exporter) with the steps as events and the operation ID, and a ``callgate`` log record;
and the store additions the service reads (pending confirmations with their drafts)."""

from __future__ import annotations

import logging
import os
import random
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from callgate_rules.harness.world import WorldResolvers
from callgate_rules.integrations.telemetry import DecisionSpans, log_decision
from callgate_rules.pipeline.hosted import HostedWrites
from callgate_rules.store import MemoryStore, NewOperation, ReceiptState, SqliteStore, open_store
from callgate_rules.store.base import ReceiptStore

from .conftest import drop_schema
from .test_hosted import CONFIG, DANA, SESSION, WORLD, payment

sdk = pytest.importorskip("opentelemetry.sdk.trace", reason="opentelemetry-sdk is not "
                                                            "installed (the otel extra)")
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)


def test_a_span_per_decision_with_steps_and_operation_id(
        caplog: pytest.LogCaptureFixture) -> None:
    exporter = InMemorySpanExporter()
    provider = sdk.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    spans = DecisionSpans(provider.get_tracer("callgate"))
    flow = HostedWrites(CONFIG, resolvers=WorldResolvers(WORLD), store=MemoryStore(),
                        rng=random.Random(1), observers=[spans, log_decision])
    with caplog.at_level(logging.INFO, logger="callgate"):
        step = flow.claim(payment(), actor=DANA, request_id="t1", session=SESSION)
        assert step.lease is not None
        done = flow.finish(step.operation_id, step.lease, actor=DANA,
                           result={"iban": "DE89370400440532013000", "id": "p"})
    assert done.decision is not None
    [span] = exporter.get_finished_spans()
    assert span.name == "callgate.decision"
    assert span.attributes is not None
    assert span.attributes["callgate.operation_id"] == step.operation_id
    assert span.attributes["callgate.route"] == "return_result"
    steps = [event.name for event in span.events]
    assert steps[:2] == ["propose", "parse"] and "execute" in steps and steps[-1] == "route"
    assert span.end_time is not None and span.start_time is not None
    assert span.end_time >= span.start_time
    [record] = [r for r in caplog.records if r.name == "callgate.decisions"]
    assert step.operation_id in record.getMessage()
    # the same observer works on a plain gate's decision
    spans(flow.gate.check({"name": "noSuchTool", "arguments": {}}, actor=DANA))
    assert exporter.get_finished_spans()[-1].attributes["callgate.error_class"] == \
        "unknown_tool"


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ReceiptStore]:
    url = None
    if request.param == "memory":
        opened: ReceiptStore = MemoryStore()
    elif request.param == "sqlite":
        opened = SqliteStore(tmp_path / "r.db")
    else:
        base = os.environ.get("CALLGATE_TEST_POSTGRES_URL")
        if base is None:
            pytest.skip("CALLGATE_TEST_POSTGRES_URL is not set; the PostgreSQL store tests "
                        "need a server (see README)")
        url = f"{base}?schema=cg_pending_{uuid.uuid4().hex[:8]}"
        opened = open_store(url)
    yield opened
    opened.close()
    if url is not None:
        drop_schema(url)


def test_pending_confirmations_keep_their_drafts(store: ReceiptStore) -> None:
    now = datetime(2026, 11, 29, 12, tzinfo=UTC)
    for index in range(3):
        operation = NewOperation(f"op-{index}", "r", "sendPayment", "1", f"h{index}",
                                 {"amount": index}, {"id": "U-7"})
        store.hold_for_confirmation(operation, expires_at=now + timedelta(minutes=5),
                                    now=now + timedelta(seconds=index),
                                    detail=f"Pay {index} EUR:\n  amount: {index}")
    store.claim(NewOperation("op-claimed", "r", "sendPayment", "1", "hc", {}, {}),
                worker="w", lease=timedelta(seconds=5), now=now)
    pending = store.list_receipts(state=ReceiptState.AWAITING_CONFIRMATION)
    assert [r.operation_id for r in pending] == ["op-0", "op-1", "op-2"]
    assert pending[1].detail == "Pay 1 EUR:\n  amount: 1"
    assert [r.operation_id for r in store.list_receipts(
        state=ReceiptState.AWAITING_CONFIRMATION, limit=2)] == ["op-0", "op-1"]
    assert [r.operation_id for r in store.list_receipts(state=ReceiptState.CLAIMED)] == \
        ["op-claimed"]


def test_span_events_lie_inside_their_span_and_the_service_is_named_callgate(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from callgate_rules.integrations.telemetry import service_resource

    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    exporter = InMemorySpanExporter()
    provider = sdk.TracerProvider(resource=service_resource())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    flow = HostedWrites(CONFIG, resolvers=WorldResolvers(WORLD), store=MemoryStore(),
                        rng=random.Random(1),
                        observers=[DecisionSpans(provider.get_tracer("callgate"))])
    step = flow.claim(payment(), actor=DANA, request_id="t-events", session=SESSION)
    assert step.lease is not None
    flow.finish(step.operation_id, step.lease, actor=DANA, session=SESSION,
                result={"iban": "DE89370400440532013000", "id": "p"})
    [span] = exporter.get_finished_spans()
    assert span.resource.attributes["service.name"] == "callgate"
    assert span.start_time is not None and span.end_time is not None and span.events
    assert all(span.start_time <= event.timestamp <= span.end_time for event in span.events)
    monkeypatch.setenv("OTEL_SERVICE_NAME", "refunds-gate")
    assert service_resource().attributes["service.name"] == "refunds-gate"
