"""Runs named across requests and instances, the look-ups' records passed in the body, and
the service's decision log: against two real ``callgate serve`` processes sharing one store
(SQLite file, PostgreSQL schema)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .conftest import DANA, ON_FILE, SESSION, Server, drop_schema, postgres_store, start_server

TICKET = {"id": "T-77001", "tenant": "acme", "team": "billing", "status": "open",
          "subject": "Kept in the host's own database"}


@dataclass
class Pair:
    first: Server
    second: Server
    decision_log: Path


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def pair(request: pytest.FixtureRequest, documents: Path,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    if request.param == "sqlite":
        store = f"sqlite:///{tmp_path_factory.mktemp('runs') / 'receipts.db'}"
    else:
        store = postgres_store()
    log = tmp_path_factory.mktemp("decisions") / "decisions.jsonl"
    first = start_server(documents, store, "--decision-log", str(log))
    try:
        second = start_server(documents, store)
        try:
            yield Pair(first, second, log)
        finally:
            second.stop()
    finally:
        first.stop()
        if request.param == "postgres":
            drop_schema(store)


def decide(server: Server, call: Any, **extra: Any) -> dict[str, Any]:
    with server.client() as client:
        answer = client.post("/v1/decide", json={
            "model_output": call, "actor": DANA, "session": SESSION,
            "request_id": f"req-{uuid.uuid4().hex[:10]}", **extra})
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def ticket_call(ticket_id: str = "T-1001") -> dict[str, Any]:
    return {"name": "getTicketStatus", "arguments": {"ticketId": ticket_id}}


def test_a_runs_calls_per_tool_hold_across_requests_and_instances(pair: Pair) -> None:
    run = f"run-{uuid.uuid4().hex[:8]}"
    routes = [decide(pair.first if n % 2 else pair.second, ticket_call(), run_id=run)
              for n in range(6)]  # calls_per_tool_per_run: 5 in the routing table
    assert [r["route"] for r in routes[:5]] == ["execute"] * 5
    assert routes[5]["error_class"] == "budget_exhausted"
    assert routes[5]["limit_path"] == "hand_over" and routes[5]["review_id"]
    with pair.first.client() as client:
        review = next(item for item in client.get("/v1/reviews").json()
                      if item["review_id"] == routes[5]["review_id"])
    assert "5 calls of getTicketStatus in this run" in review["summary"]
    # another run, and a proposal in no run, are not limited by it
    assert decide(pair.first, ticket_call(), run_id=f"{run}-other")["route"] == "execute"
    assert decide(pair.second, ticket_call())["route"] == "execute"


def test_a_runs_regenerations_in_a_row_hold_across_instances(pair: Pair) -> None:
    run = f"run-{uuid.uuid4().hex[:8]}"
    broken = {"name": "getTicketStatus", "arguments": {"ticketId": "no ticket id"}}
    first = decide(pair.first, broken, run_id=run)
    assert first["route"] == "regenerate"
    second = decide(pair.second, broken, run_id=run)  # regenerations_per_call: 1
    assert second["error_class"] == "budget_exhausted"
    unparsable = decide(pair.first, "{not json", run_id=f"{run}-text")
    assert unparsable["route"] == "regenerate"
    assert decide(pair.second, "{still not json", run_id=f"{run}-text")["error_class"] == \
        "budget_exhausted"


def test_a_runs_failed_writes_count_against_its_failure_budget(pair: Pair) -> None:
    run = f"run-{uuid.uuid4().hex[:8]}"
    failures = []
    for amount in (11.0, 12.0, 13.0, 14.0, 15.0):  # failures_per_run: 4
        call = {"name": "sendPayment", "arguments": {
            "recipientIban": ON_FILE, "amount": amount, "currency": "EUR"}}
        with pair.first.client() as client:
            step = client.post("/v1/claim", json={
                "model_output": call, "actor": DANA, "session": SESSION, "run_id": run,
                "request_id": f"req-{uuid.uuid4().hex[:10]}"}).json()
            if step["action"] != "execute":
                failures.append(step["decision"]["error_class"])
                continue
            done = client.post("/v1/finish", json={
                "operation_id": step["operation_id"], "lease": step["lease"], "actor": DANA,
                "failure": {"sent": True, "error_class": "permanent",
                            "detail": "the bank refused it"}}).json()
            failures.append(done["decision"]["error_class"])
    assert failures == ["permanent"] * 4 + ["budget_exhausted"]


def test_records_passed_in_the_body_are_the_look_ups_records(pair: Pair) -> None:
    # a ticket the world file does not have, passed by the host
    found = decide(pair.first, ticket_call("T-77001"), records={"ticket": TICKET})
    assert found["route"] == "execute", found
    assert decide(pair.first, ticket_call("T-77001"))["error_class"] == "not_found"
    # the host says there is none: the world file's record is not consulted
    assert decide(pair.second, ticket_call("T-1001"), records={"ticket": None})[
        "error_class"] == "not_found"
    # another tenant's record passed by the host is still not visible to this actor
    foreign = {**TICKET, "tenant": "globex"}
    assert decide(pair.second, ticket_call("T-77001"), records={"ticket": [foreign]})[
        "route"] != "execute"


@pytest.mark.parametrize(("records", "field", "words"), [
    ({"tickets": TICKET}, "body.records.tickets", "no contract has a look-up 'tickets'"),
    ({"ticket": {"id": "T-77001", "tenant": "acme", "team": "billing"}},
     "body.records.ticket", "'status' is a required property"),
    ({"ticket": [TICKET, "T-1"]}, "body.records.ticket[1]", "must be a JSON object"),
    ({"ticket": {**TICKET, "tenant": 7}}, "body.records.ticket.tenant", "is not of type"),
])
def test_records_that_do_not_match_their_schema_are_a_422_naming_the_field(
        pair: Pair, records: dict[str, Any], field: str, words: str) -> None:
    with pair.first.client() as client:
        answer = client.post("/v1/decide", json={
            "model_output": ticket_call("T-77001"), "actor": DANA, "session": SESSION,
            "request_id": "req-bad-records", "records": records})
    assert answer.status_code == 422
    assert answer.headers["content-type"].startswith("application/problem+json")
    errors = answer.json()["errors"]
    assert any(e["field"] == field and words in e["message"] for e in errors), errors


def test_the_decision_log_has_every_decision_masked(pair: Pair) -> None:
    secret_body = f"the private words {uuid.uuid4().hex}"
    email = {"name": "sendEmail", "arguments": {
        "to": "anna.petrova@northwind.example", "subject": "Hello", "body": secret_body}}
    decided = decide(pair.first, email)
    marker = decide(pair.first, ticket_call("T-1002"))
    lines = pair.decision_log.read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert any(r.get("request_id") and r.get("tool") == "getTicketStatus" and
               r.get("route") == marker["route"] for r in records)
    assert any(r.get("tool") == "sendEmail" and r.get("route") == decided["route"]
               for r in records)
    assert secret_body not in pair.decision_log.read_text()


def test_without_a_world_the_records_the_call_needs_are_asked_for(
        documents: Path, tmp_path: Path) -> None:
    server = start_server(documents, f"sqlite:///{tmp_path / 'receipts.db'}", world=False)
    try:
        with server.client() as client:
            answer = client.post("/v1/decide", json={
                "model_output": ticket_call("T-77001"), "actor": DANA, "session": SESSION,
                "request_id": "req-no-world"})
        assert answer.status_code == 422, answer.text
        assert answer.json()["errors"] == [{
            "field": "body.records.ticket",
            "message": "the call's look-up needs these records"}]
        assert decide(server, ticket_call("T-77001"),
                      records={"ticket": TICKET})["route"] == "execute"
    finally:
        server.stop()
