"""``--resolver-url``: the service asks the host's own endpoint for the look-ups' records
over HTTP. A real resolver endpoint (a stdlib HTTP server in this process) and a real
``callgate serve``; the endpoint failing in every way a network can is ``transient``,
within the look-up's total deadline: an answer trickled a byte at a time (headers or body)
is cut off by it, and readiness answers at once while twenty such look-ups are in flight.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from .conftest import DANA, SESSION, Server, start_server

pytestmark = pytest.mark.integration

TICKETS = {"T-5001": {"id": "T-5001", "tenant": "acme", "team": "billing", "status": "open",
                      "subject": "Answered by the host's endpoint"}}
# a ticket ID → how the endpoint misbehaves for it
FAULTS = {"T-5002": "500", "T-5003": "junk", "T-5004": "slow", "T-5005": "huge",
          "T-5006": "text", "T-5007": "trickle", "T-5008": "trickle-headers"}
TRICKLED = json.dumps([TICKETS["T-5001"]]).encode()


def trickle(handler: BaseHTTPRequestHandler, data: bytes, every: float) -> None:
    """``data`` a byte at a time: each byte well within any per-read timeout."""
    try:
        for byte in data:
            handler.wfile.write(bytes([byte]))
            handler.wfile.flush()
            time.sleep(every)
    except OSError:  # the service gave up on it, as it should
        pass


def trickled_answer(handler: BaseHTTPRequestHandler, headers_too: bool) -> None:
    head = (f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
            f"content-length: {len(TRICKLED)}\r\n\r\n").encode()
    if headers_too:
        trickle(handler, head + TRICKLED, 0.2)
        return
    handler.wfile.write(head)
    trickle(handler, TRICKLED, 1.0)


class Endpoint(BaseHTTPRequestHandler):
    asked: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        Endpoint.asked.append({**body, "authorization": self.headers.get("authorization")})
        fault = FAULTS.get(str(body["value"]))
        if fault in ("trickle", "trickle-headers"):
            trickled_answer(self, headers_too=fault == "trickle-headers")
            return
        if fault == "slow":
            time.sleep(3)
        if fault == "500":
            self.send_response(500)
            self.end_headers()
            return
        payload: Any = [r for r in TICKETS.values() if r.get(body["field"]) == body["value"]]
        if fault == "junk":
            payload = {"id": body["value"]}  # a record, not a list of them
        elif fault == "huge":
            payload = [{"id": "x" * 1000}] * 2000
        data = b"<html>" if fault == "text" else json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def resolved(documents: Path,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    endpoint = ThreadingHTTPServer(("127.0.0.1", 0), Endpoint)
    thread = threading.Thread(target=endpoint.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{endpoint.server_address[1]}/records"
    store = f"sqlite:///{tmp_path_factory.mktemp('resolver') / 'receipts.db'}"
    server = start_server(documents, store, "--resolver-url", url, "--resolver-timeout", "1",
                          world=False, env_extra={"CALLGATE_RESOLVER_TOKEN": "resolver-key"})
    try:
        yield server
    finally:
        server.stop()
        endpoint.shutdown()


def decide(server: Server, ticket: str, **extra: Any) -> dict[str, Any]:
    with server.client() as client:
        answer = client.post("/v1/decide", json={
            "model_output": {"name": "getTicketStatus", "arguments": {"ticketId": ticket}},
            "actor": DANA, "session": SESSION, "request_id": f"r-{uuid.uuid4().hex[:8]}",
            **extra})
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def test_the_endpoint_answers_the_look_ups(resolved: Server) -> None:
    assert decide(resolved, "T-5001")["route"] == "execute"
    assert decide(resolved, "T-5999")["error_class"] == "not_found"
    asked = [a for a in Endpoint.asked if a["value"] == "T-5001"][-1]
    assert asked == {"collection": "tickets", "field": "id", "value": "T-5001",
                     "authorization": "Bearer resolver-key"}


def test_records_in_the_body_come_before_the_endpoint(resolved: Server) -> None:
    before = len(Endpoint.asked)
    assert decide(resolved, "T-5001", records={"ticket": None})["error_class"] == "not_found"
    assert len(Endpoint.asked) == before  # not asked: the host said there is none


@pytest.mark.parametrize("ticket", sorted(FAULTS))
def test_an_endpoint_that_fails_is_transient_never_a_guess(resolved: Server,
                                                           ticket: str) -> None:
    started = time.monotonic()
    decided = decide(resolved, ticket)
    assert decided["error_class"] == "transient", decided
    assert "could not be read right now" in decided["agent_message"]
    assert time.monotonic() - started < 2.5  # the resolver's 1 s timeout, not its 3 s


class Trickler(BaseHTTPRequestHandler):
    """An endpoint that answers every look-up a byte a second."""

    asked = 0
    lock = threading.Lock()

    def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
        self.rfile.read(int(self.headers["content-length"]))
        with Trickler.lock:
            Trickler.asked += 1
        trickled_answer(self, headers_too=False)

    def log_message(self, *args: Any) -> None:
        pass


IN_FLIGHT = 20
LOOKUP_DEADLINE = 2.0  # the service's --resolver-timeout (the contract's is 3 s)
READINESS_TIMEOUT = 2.0


@pytest.fixture(scope="module")
def trickled(documents: Path,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    endpoint = ThreadingHTTPServer(("127.0.0.1", 0), Trickler)
    endpoint.daemon_threads = True
    threading.Thread(target=endpoint.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{endpoint.server_address[1]}/records"
    store = f"sqlite:///{tmp_path_factory.mktemp('trickled') / 'receipts.db'}"
    server = start_server(documents, store, "--resolver-url", url,
                          "--resolver-timeout", str(LOOKUP_DEADLINE),
                          "--readiness-timeout", str(READINESS_TIMEOUT), world=False)
    try:
        yield server
    finally:
        server.stop()
        endpoint.shutdown()


def test_readiness_never_waits_behind_trickling_look_ups(trickled: Server) -> None:
    """Twenty look-ups trickled a byte a second fill the gate's lanes (16 by default):
    /readyz answers at once all the same, and every decision ends ``transient`` by its
    look-up's deadline, never at the request's 30 s limit."""
    decided: list[dict[str, Any]] = []
    started = time.monotonic()

    def one(index: int) -> None:
        decided.append(decide(trickled, f"T-{6000 + index}"))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(IN_FLIGHT)]
    for thread in threads:
        thread.start()
    waited = time.monotonic() + 10
    while Trickler.asked < 16 and time.monotonic() < waited:  # the lanes are full
        time.sleep(0.05)
    assert Trickler.asked >= 16
    asked = time.monotonic()
    ready = httpx.get(f"{trickled.url}/readyz", timeout=30)
    readiness_took = time.monotonic() - asked
    for thread in threads:
        thread.join(60)
    took = time.monotonic() - started
    assert ready.status_code == 200, ready.text
    assert readiness_took < 3 * READINESS_TIMEOUT
    assert len(decided) == IN_FLIGHT
    assert all(each["error_class"] == "transient" for each in decided), decided
    # two waves of look-ups (16 lanes, then 4), each cut off by its deadline
    assert took < 3 * 2 * LOOKUP_DEADLINE + 10
