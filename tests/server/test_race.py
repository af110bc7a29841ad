"""Two ``callgate serve`` instances sharing one PostgreSQL store: hosts racing the same
operation through both produce one execution; a lease left by a host that died through
one instance expires into reconciliation through the other; a store that goes away is a
503 on readiness and a classified route on writes."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from .conftest import (
    DANA,
    LEASE_SECONDS,
    ON_FILE,
    SESSION,
    Server,
    drop_schema,
    payment,
    postgres_store,
    start_server,
)


@pytest.fixture(scope="module")
def pair(documents: Path) -> Iterator[tuple[Server, Server]]:
    store = postgres_store()
    first = start_server(documents, store)
    try:
        second = start_server(documents, store)
    except BaseException:
        first.stop()
        raise
    try:
        yield first, second
    finally:
        first.stop()
        second.stop()
        drop_schema(store)


def host(server: Server, call: dict[str, Any], request_id: str,
         executions: list[str]) -> dict[str, Any]:
    """A host: claim, execute when told (counting it), finish; wait when told to."""
    with server.client() as client:
        step = client.post("/v1/claim", json={"model_output": call, "actor": DANA,
                                              "session": SESSION,
                                              "request_id": request_id}).json()
        for _ in range(200):
            if step["action"] == "execute":
                executions.append(step["lease"])
                time.sleep(0.05)  # the destination takes a moment
                step = client.post("/v1/finish", json={
                    "operation_id": step["operation_id"], "lease": step["lease"],
                    "actor": DANA, "result": {"iban": ON_FILE, "id": f"pay-{request_id}"}}
                ).json()
            elif step["action"] == "retry":
                time.sleep(min(step["retry_after"] or 0.05, 0.2))
                step = client.post("/v1/claim", json={"operation_id": step["operation_id"],
                                                      "actor": DANA}).json()
            else:
                return dict(step["decision"])
    raise AssertionError(f"the host never finished: {step}")


def test_racing_hosts_through_two_instances_execute_once(pair: tuple[Server, Server]) -> None:
    request_id = f"race-{uuid.uuid4().hex[:8]}"
    call = payment(amount=77)
    executions: list[str] = []
    results: list[dict[str, Any]] = []
    barrier = threading.Barrier(8)

    def racer(index: int) -> None:
        barrier.wait()
        results.append(host(pair[index % 2], call, request_id, executions))

    threads = [threading.Thread(target=racer, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert len(executions) == 1, executions
    assert len(results) == 8
    assert {r["route"] for r in results} <= {"return_result", "return_receipt"}
    assert [r["route"] for r in results].count("return_result") == 1
    assert all(r["result"] == {"iban": ON_FILE, "id": f"pay-{request_id}"} for r in results)


def test_a_lease_left_through_one_instance_is_reconciled_through_the_other(
        pair: tuple[Server, Server]) -> None:
    first, second = pair
    call = {"model_output": payment(amount=78), "actor": DANA, "session": SESSION,
            "request_id": f"dies-{uuid.uuid4().hex[:8]}"}
    with first.client() as client:
        claimed = client.post("/v1/claim", json=call).json()
    assert claimed["action"] == "execute"  # ... and the host dies here
    time.sleep(LEASE_SECONDS + 0.5)
    with second.client() as client:
        taken = client.post("/v1/claim", json=call).json()
        assert taken["action"] == "reconcile"
        found = {"iban": ON_FILE, "amount": 78, "currency": "EUR", "id": "pay-78"}
        done = client.post("/v1/reconcile", json={
            "operation_id": taken["operation_id"], "lease": taken["lease"], "actor": DANA,
            "found": found}).json()
    assert done["decision"]["route"] == "return_result"
    assert done["decision"]["result"] == found


def test_store_gone_is_503_on_readiness_and_a_route_on_writes(documents: Path) -> None:
    store = postgres_store()
    server = start_server(documents, store)
    try:
        assert httpx.get(f"{server.url}/readyz").status_code == 200
        drop_schema(store)
        ready = httpx.get(f"{server.url}/readyz")
        assert ready.status_code == 503 and "receipt store" in ready.json()["detail"]
        with server.client() as client:
            claimed = client.post("/v1/claim", json={
                "model_output": payment(amount=79), "actor": DANA, "session": SESSION,
                "request_id": "store-gone"})
        assert claimed.status_code == 200
        decision = claimed.json()["decision"]
        assert decision["route"] == "retry" and decision["error_class"] == "transient"
        assert httpx.get(f"{server.url}/metrics").status_code == 200
    finally:
        server.stop()
        drop_schema(store)
