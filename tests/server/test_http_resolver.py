"""``--resolver-url``: the service asks the host's own endpoint for the look-ups' records
over HTTP. A real resolver endpoint (a stdlib HTTP server in this process) and a real
``callgate serve``; the endpoint failing in every way a network can is ``transient``."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from .conftest import DANA, SESSION, Server, start_server

TICKETS = {"T-5001": {"id": "T-5001", "tenant": "acme", "team": "billing", "status": "open",
                      "subject": "Answered by the host's endpoint"}}
# a ticket ID → how the endpoint misbehaves for it
FAULTS = {"T-5002": "500", "T-5003": "junk", "T-5004": "slow", "T-5005": "huge",
          "T-5006": "text"}


class Endpoint(BaseHTTPRequestHandler):
    asked: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        Endpoint.asked.append({**body, "authorization": self.headers.get("authorization")})
        fault = FAULTS.get(str(body["value"]))
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
