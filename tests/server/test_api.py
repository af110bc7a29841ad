"""The decision API over HTTP against a real ``callgate serve`` process, SQLite and
PostgreSQL: the write protocol, authentication, bad input, the review queue, metrics."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from .conftest import (
    DANA,
    INJECTED,
    LEASE_SECONDS,
    ON_FILE,
    SESSION,
    Server,
    injected_conversation,
    payment,
    token,
)


def rid() -> str:
    return f"req-{uuid.uuid4().hex[:12]}"


def body(call: Any, request_id: str, **extra: Any) -> dict[str, Any]:
    return {"model_output": call, "actor": DANA, "session": SESSION, "request_id": request_id,
            **extra}


def test_decide_claim_finish_and_the_receipt(server: Server) -> None:
    request_id = rid()
    with server.client() as client:
        decided = client.post("/v1/decide", json=body(payment(), request_id)).json()
        assert decided["route"] == "execute" and decided["operation_id"]
        step = client.post("/v1/claim", json=body(payment(), request_id)).json()
        assert step["action"] == "execute" and step["operation_id"] == decided["operation_id"]
        assert step["lease"] and step["deadline"] and step["arguments"]["amount"] == 120.0
        done = client.post("/v1/finish", json={
            "operation_id": step["operation_id"], "lease": step["lease"], "actor": DANA,
            "result": {"iban": ON_FILE, "id": "pay-1"}}).json()
        assert done["action"] == "done"
        assert done["decision"]["route"] == "return_result"
        assert done["decision"]["result"] == {"iban": ON_FILE, "id": "pay-1"}
        # the same call in the same request: the receipt, no second execution
        again = client.post("/v1/claim", json=body(payment(), request_id)).json()
        assert again["action"] == "done"
        assert again["decision"]["route"] == "return_receipt"
        assert again["decision"]["result"] == {"iban": ON_FILE, "id": "pay-1"}
        by_id = client.post("/v1/claim", json={"operation_id": step["operation_id"],
                                               "actor": DANA}).json()
        assert by_id["decision"]["route"] == "return_receipt"


def test_unknown_outcome_reconciles(server: Server) -> None:
    with server.client() as client:
        step = client.post("/v1/claim", json=body(payment(amount=33), rid())).json()
        operation, lease = step["operation_id"], step["lease"]
        asked = client.post("/v1/finish", json={
            "operation_id": operation, "lease": lease, "actor": DANA,
            "failure": {"sent": True, "detail": "read timed out"}}).json()
        assert asked["action"] == "reconcile" and asked["lease"] == lease
        found = {"iban": ON_FILE, "amount": 33, "currency": "EUR", "id": "pay-33"}
        done = client.post("/v1/reconcile", json={
            "operation_id": operation, "lease": lease, "actor": DANA, "found": found}).json()
        assert done["decision"]["route"] == "return_result"
        assert done["decision"]["result"] == found


def test_a_dead_hosts_lease_expires_into_reconciliation(server: Server) -> None:
    with server.client() as client:
        first = client.post("/v1/claim", json=body(payment(amount=44), rid())).json()
        assert first["action"] == "execute"
        busy = client.post("/v1/claim", json={"operation_id": first["operation_id"],
                                              "actor": DANA}).json()
        assert busy["action"] == "retry"
        time.sleep(LEASE_SECONDS + 0.5)  # the first host died without finishing
        taken = client.post("/v1/claim", json={"operation_id": first["operation_id"],
                                               "actor": DANA}).json()
        assert taken["action"] == "reconcile" and taken["lease"] != first["lease"]
        late = client.post("/v1/finish", json={
            "operation_id": first["operation_id"], "lease": first["lease"], "actor": DANA,
            "result": {"iban": ON_FILE, "id": "late"}})
        assert late.status_code == 409
        assert late.headers["content-type"] == "application/problem+json"
        nothing = client.post("/v1/reconcile", json={
            "operation_id": first["operation_id"], "lease": taken["lease"], "actor": DANA,
            "found": None}).json()
        assert nothing["action"] == "execute"  # key idempotency: resending the same ID is safe


def test_confirmation_through_the_api(server: Server) -> None:
    request_id = rid()
    with server.client() as client:
        held = client.post("/v1/decide", json=body(
            payment(INJECTED, 50), request_id,
            conversation=injected_conversation())).json()
        assert held["route"] == "await_confirmation" and held["confirmation_token"]
        assert "WARNING: recipientIban" in held["draft"]
        pending = client.get("/v1/confirmations").json()
        assert held["operation_id"] in [p["operation_id"] for p in pending]
        step = client.post("/v1/confirm", json={
            "confirmation_token": held["confirmation_token"], "actor": DANA,
            "confirmed_by": "dana", "session": SESSION}).json()
        assert step["action"] == "execute"
        done = client.post("/v1/finish", json={
            "operation_id": step["operation_id"], "lease": step["lease"], "actor": DANA,
            "result": {"iban": INJECTED, "id": "pay-50"}}).json()
        assert done["decision"]["route"] == "return_result"
        replay = client.post("/v1/confirm", json={
            "confirmation_token": held["confirmation_token"], "actor": DANA,
            "confirmed_by": "dana", "session": SESSION}).json()
        assert replay["decision"]["route"] == "return_receipt"


def test_the_review_queue(server: Server) -> None:
    with server.client(authorization=f"Bearer {token('reviewer-1')}") as client:
        step = client.post("/v1/claim", json=body(payment(amount=55), rid())).json()
        sent = client.post("/v1/finish", json={
            "operation_id": step["operation_id"], "lease": step["lease"], "actor": DANA,
            "result": {"iban": "NOT-THE-IBAN"}}).json()  # fails the contract's verify
        assert sent["decision"]["route"] == "review"
        review_id = sent["decision"]["review_id"]
        listed = client.get("/v1/reviews", params={"status": "open"}).json()
        assert review_id in [item["review_id"] for item in listed]
        taken = None
        while taken is None or taken["review_id"] != review_id:
            taken = client.post("/v1/reviews/take").json()
            assert taken is not None, "the item was not in the queue"
        assert taken["taken_by"] == "reviewer-1"
        resolved = client.post(f"/v1/reviews/{review_id}/resolve", json={
            "resolution": "failed", "note": "the bank shows no such payment"}).json()
        assert resolved["status"] == "resolved" and resolved["resolved_by"] == "reviewer-1"
        again = client.post(f"/v1/reviews/{review_id}/resolve", json={
            "resolution": "failed", "note": "twice"})
        assert again.status_code == 409
        missing = client.post("/v1/reviews/nope/resolve", json={
            "resolution": "failed", "note": "x"})
        assert missing.status_code == 404


def test_tokens_and_pinned_actors(server: Server) -> None:
    call = body(payment(), rid())
    assert httpx.post(f"{server.url}/v1/decide", json=call).status_code == 401
    with server.client(authorization="Bearer not-a-jwt") as client:
        assert client.post("/v1/decide", json=call).status_code == 401
    with server.client(authorization=f"Bearer {token(seconds=-60)}") as client:
        assert client.post("/v1/decide", json=call).status_code == 401
    with server.client(authorization=f"Bearer {token(tenant='globex')}") as client:
        refused = client.post("/v1/decide", json=call)
        assert refused.status_code == 403
        assert refused.json()["errors"][0]["field"] == "body.actor.tenant"
        # an actor without the field gets it from the token
        filled = client.post("/v1/decide", json={**call, "actor": {"id": "U-90",
                                                                   "role": "agent"}})
        assert filled.status_code == 200
    with server.client() as client:
        stranger = client.post("/v1/claim", json={"operation_id": "op_nothing",
                                                  "actor": DANA})
        assert stranger.status_code == 404


def test_bad_input_is_a_problem_not_a_500(server: Server) -> None:
    with server.client() as client:
        malformed = client.post("/v1/decide", content=b'{"model_output": ',
                                headers={"content-type": "application/json"})
        assert malformed.status_code == 400
        assert malformed.headers["content-type"] == "application/problem+json"
        unknown = client.post("/v1/decide", json={**body(payment(), rid()), "actr": {}})
        assert unknown.status_code == 422
        assert {"field": "body.actr", "message": unknown.json()["errors"][0]["message"]} \
            in unknown.json()["errors"]
        wrong_type = client.post("/v1/decide", content=b"model_output=1",
                                 headers={"content-type": "application/x-www-form-urlencoded"})
        assert wrong_type.status_code == 415
        huge = client.post("/v1/decide", json=body("x" * 300_000, rid()))
        assert huge.status_code == 413
        both = client.post("/v1/claim", json={"operation_id": "a", "model_output": {},
                                              "actor": DANA, "request_id": "r"})
        assert both.status_code == 422
        # the model's hostile output is the gate's business: a decision, never an error
        deep = '{"a":' * 5000 + "{}" + "}" * 5000
        envelope = json.dumps(body("DEEP", rid())).replace('"DEEP"', deep)
        hostile = client.post("/v1/decide", content=envelope,
                              headers={"content-type": "application/json"})
        assert hostile.status_code in (200, 400), hostile.text  # a decision, or unparseable
        assert hostile.headers["content-type"] in ("application/json",
                                                   "application/problem+json")
        text = client.post("/v1/decide", json=body("sendPayment({]", rid()))
        assert text.status_code == 200 and text.json()["error_class"] == "malformed"
        bad_failure = client.post("/v1/finish", json={
            "operation_id": "x", "lease": "y", "actor": DANA,
            "failure": {"sent": True, "error_class": "duplicate"}})
        assert bad_failure.status_code == 422
        assert bad_failure.json()["errors"][0]["field"] == "body.failure.error_class"


def test_health_readiness_openapi(server: Server) -> None:
    assert httpx.get(f"{server.url}/healthz").json() == {"status": "ok"}
    assert httpx.get(f"{server.url}/readyz").json() == {"status": "ready"}
    document = httpx.get(f"{server.url}/openapi.json").json()
    assert document["openapi"].startswith("3.")
    assert {"/v1/decide", "/v1/claim", "/v1/finish", "/v1/reconcile", "/v1/confirm",
            "/v1/reviews", "/v1/reviews/take", "/v1/reviews/{review_id}/resolve",
            "/v1/confirmations"} <= set(document["paths"])


def test_metrics_parse(server: Server) -> None:
    with server.client() as client:
        client.post("/v1/decide", json=body({"name": "noSuchTool", "arguments": {}}, rid()))
        client.post("/v1/decide", json=body(payment(INJECTED, 7), rid(),
                                            conversation=injected_conversation()))
    text = httpx.get(f"{server.url}/metrics").text
    families = {family.name: family for family in text_string_to_metric_families(text)}
    decisions = {tuple(sorted(s.labels.items())): s.value
                 for s in families["callgate_decisions"].samples}
    assert any(dict(labels)["tool"] == "sendPayment" for labels in decisions)
    assert all(dict(labels)["tool"] in ("sendPayment", "none", "unknown")
               for labels in decisions)  # a made-up tool name never becomes a label
    outcomes = families["callgate_outcomes"].samples
    assert any(s.labels["counter"] == "argument_errors" for s in outcomes)
    latency = [s for s in families["callgate_request_seconds"].samples
               if s.name == "callgate_request_seconds_count"]
    assert {s.labels["endpoint"] for s in latency} >= {"decide"}
    store = [s for s in families["callgate_store_seconds"].samples
             if s.name == "callgate_store_seconds_count"]
    assert {s.labels["operation"] for s in store} >= {"hold_for_confirmation"}
    [pending] = families["callgate_pending_confirmations"].samples
    assert pending.value >= 1
    depth = {s.labels["status"]: s.value for s in
             families["callgate_review_queue_depth"].samples}
    assert set(depth) == {"open", "taken"}
