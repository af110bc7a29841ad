"""The service's boundary against hostile and broken clients, against the real thing:
``callgate serve`` under uvicorn on a loopback port, spoken to over raw sockets where an
HTTP library would be too polite.

- headers that never complete and a body that never completes are cut off with 408, by
  their deadlines (``--header-timeout``, ``--body-timeout``);
- a client with ``--client-concurrency`` requests unfinished is answered 429 for the next;
- a lone surrogate in any string (or key) of a body, or bytes that are not UTF-8, are a
  400 problem naming the field, never a 500;
- a body that repeats a key, at any depth, is a 400 problem naming the key;
- a 405 carries ``Allow``; the OpenAPI document lists the look-up names and the claim's
  two shapes;
- with the PostgreSQL store gone, no answer carries its address or the driver's words,
  and the log does.

Bounds are generous (3× the configured deadline): outcomes are asserted, not speed.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from .conftest import (
    DANA,
    POSTGRES,
    SESSION,
    Server,
    drop_schema,
    payment,
    start_server,
    token,
)

pytestmark = pytest.mark.integration

HEADER_TIMEOUT = 1.0
BODY_TIMEOUT = 3.0
PER_CLIENT = 3
MARK = "MARK-0"  # replaced by the hostile text in the JSON as sent


@pytest.fixture(scope="module")
def limited(documents: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    store = f"sqlite:///{tmp_path_factory.mktemp('boundary') / 'receipts.db'}"
    server = start_server(documents, store, "--header-timeout", str(HEADER_TIMEOUT),
                          "--body-timeout", str(BODY_TIMEOUT),
                          "--client-concurrency", str(PER_CLIENT))
    try:
        yield server
    finally:
        server.stop()


def address(server: Server) -> tuple[str, int]:
    parts = urlsplit(server.url)
    assert parts.hostname is not None and parts.port is not None
    return parts.hostname, parts.port


def request_head(path: str, length: int) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\n"
            f"authorization: Bearer {token()}\r\ncontent-type: application/json\r\n"
            f"content-length: {length}\r\n\r\n").encode()


def answer_of(connection: socket.socket, within: float) -> tuple[bytes, float]:
    """Everything the server sends until it closes the connection, and when it closed."""
    started = time.monotonic()
    connection.settimeout(within)
    received = b""
    try:
        while chunk := connection.recv(65536):
            received += chunk
    except TimeoutError:
        pass
    return received, time.monotonic() - started


def status_of(raw: bytes) -> int:
    return int(raw.split(b" ", 2)[1]) if raw.startswith(b"HTTP/1.1 ") else 0


def problem_of(raw: bytes) -> dict[str, Any]:
    head, _, body = raw.partition(b"\r\n\r\n")
    assert b"content-type: application/problem+json" in head.lower(), raw
    return dict(json.loads(body))


# -- slow requests -------------------------------------------------------------------------

def test_a_body_that_never_completes_is_cut_off_with_408(limited: Server) -> None:
    with socket.create_connection(address(limited)) as connection:
        connection.sendall(request_head("/v1/decide", 400) + b'{"model_output": {"na')
        raw, took = answer_of(connection, within=3 * BODY_TIMEOUT)
    assert status_of(raw) == 408, raw
    assert took < 3 * BODY_TIMEOUT
    assert "did not arrive within" in problem_of(raw)["detail"]


def test_headers_that_never_complete_are_cut_off_with_408(limited: Server) -> None:
    with socket.create_connection(address(limited)) as connection:
        connection.sendall(b"POST /v1/decide HTTP/1.1\r\nhost: 127.0.0.1\r\n")
        raw, took = answer_of(connection, within=3 * HEADER_TIMEOUT + 2)
    assert status_of(raw) == 408, raw
    assert took < 3 * HEADER_TIMEOUT + 2
    assert "headers did not arrive" in problem_of(raw)["detail"]


def test_headers_trickled_a_byte_at_a_time_are_cut_off_by_the_total(limited: Server) -> None:
    head = request_head("/v1/decide", 2)
    started = time.monotonic()
    closed_after: int | None = None
    with socket.create_connection(address(limited)) as connection:
        for index, byte in enumerate(head):  # each byte well within any per-read timeout
            try:
                connection.sendall(bytes([byte]))
            except OSError:  # the server closed it
                closed_after = index
                break
            time.sleep(0.1)
            if time.monotonic() - started > 3 * HEADER_TIMEOUT + 2:
                break
        raw, _ = answer_of(connection, within=2)
    assert status_of(raw) == 408, raw
    assert closed_after is None or closed_after < len(head)
    assert time.monotonic() - started < 3 * HEADER_TIMEOUT + 4


def test_a_connection_that_says_nothing_is_closed(limited: Server) -> None:
    with socket.create_connection(address(limited)) as connection:
        raw, took = answer_of(connection, within=3 * HEADER_TIMEOUT + 2)
    assert status_of(raw) == 408 and took < 3 * HEADER_TIMEOUT + 2


def test_a_client_with_too_many_unfinished_requests_is_answered_429(limited: Server) -> None:
    stalled = [socket.create_connection(address(limited)) for _ in range(PER_CLIENT)]
    try:
        for connection in stalled:
            connection.sendall(request_head("/v1/decide", 400) + b"{")
        refused = None
        deadline = time.monotonic() + BODY_TIMEOUT
        while time.monotonic() < deadline:  # until the server has all of them in hand
            answer = httpx.get(f"{limited.url}/healthz", timeout=10)
            if answer.status_code == 429:
                refused = answer
                break
            time.sleep(0.05)
        assert refused is not None, "no 429 while the client had its limit unfinished"
        assert refused.headers["content-type"] == "application/problem+json"
        assert refused.headers["retry-after"] == "1"
        assert f"{PER_CLIENT} requests unfinished" in refused.json()["detail"]
        for connection in stalled:  # each is cut off by the body deadline...
            raw, _ = answer_of(connection, within=3 * BODY_TIMEOUT)
            assert status_of(raw) == 408, raw
    finally:
        for connection in stalled:
            connection.close()
    assert httpx.get(f"{limited.url}/healthz", timeout=10).status_code == 200  # ...and freed


# -- text that is not text, keys given twice -------------------------------------------------

def decide_body(**fields: Any) -> dict[str, Any]:
    return {"model_output": payment(), "actor": DANA, "session": SESSION,
            "request_id": f"r-{uuid.uuid4().hex[:8]}", **fields}


SURROGATE_CASES = [
    ("/v1/decide", decide_body(model_output={"name": MARK, "arguments": {}}),
     "body.model_output.name"),
    ("/v1/decide", decide_body(model_output=MARK), "body.model_output"),
    ("/v1/decide", decide_body(model_output={"name": "sendPayment", "arguments": {
        "recipientIban": MARK, "amount": 1, "currency": "EUR"}}),
     "body.model_output.arguments.recipientIban"),
    ("/v1/decide", decide_body(request_id=MARK), "body.request_id"),
    ("/v1/decide", decide_body(actor={**DANA, "id": MARK}), "body.actor.id"),
    ("/v1/decide", decide_body(actor={**DANA, "teams": ["billing", MARK]}),
     "body.actor.teams[1]"),
    ("/v1/decide", decide_body(session={"authenticated": True, "note": MARK}),
     "body.session.note"),
    ("/v1/decide", decide_body(conversation=[{"role": "user", "content": MARK}]),
     "body.conversation[0].content"),
    ("/v1/decide", decide_body(run_id=MARK), "body.run_id"),
    ("/v1/decide", decide_body(records={"ticket": {"id": MARK}}), "body.records.ticket.id"),
    ("/v1/claim", {"operation_id": MARK, "actor": DANA}, "body.operation_id"),
    ("/v1/finish", {"operation_id": "op-1", "lease": MARK, "actor": DANA, "result": {}},
     "body.lease"),
    ("/v1/finish", {"operation_id": "op-1", "lease": "l-1", "actor": DANA,
                    "failure": {"sent": False, "detail": MARK}}, "body.failure.detail"),
    ("/v1/reconcile", {"operation_id": "op-1", "lease": "l-1", "actor": DANA,
                       "found": {"id": MARK}}, "body.found.id"),
    ("/v1/confirm", {"confirmation_token": "t", "actor": DANA, "confirmed_by": MARK},
     "body.confirmed_by"),
    ("/v1/reviews/R-1/resolve", {"resolution": "failed", "note": MARK}, "body.note"),
]


def send_json_text(server: Server, path: str, text: str | bytes) -> httpx.Response:
    with server.client() as client:
        return client.post(path, content=text if isinstance(text, bytes) else text.encode(),
                            headers={"content-type": "application/json"})


@pytest.mark.parametrize(("path", "body", "field"), SURROGATE_CASES,
                         ids=[field for _, _, field in SURROGATE_CASES])
def test_a_lone_surrogate_in_any_string_is_a_400_naming_it(limited: Server, path: str,
                                                            body: dict[str, Any],
                                                            field: str) -> None:
    text = json.dumps(body).replace(f'"{MARK}"', '"a\\ud800b"')
    assert "\\ud800" in text
    answer = send_json_text(limited, path, text)
    assert answer.status_code == 400, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    assert answer.json()["errors"][0]["field"] == field
    assert "lone surrogate" in answer.json()["detail"]


def test_a_lone_surrogate_in_a_key_is_a_400(limited: Server) -> None:
    text = json.dumps(decide_body(session={MARK: True})).replace(f'"{MARK}"', '"\\udfff"')
    answer = send_json_text(limited, "/v1/decide", text)
    assert answer.status_code == 400, answer.text
    assert answer.json()["errors"][0]["field"] == "body.session.\\udfff"


def test_a_body_that_is_not_utf8_is_a_400(limited: Server) -> None:
    text = json.dumps(decide_body(request_id="r-\u00e9"), ensure_ascii=False).encode("latin-1")
    assert b"r-\xe9" in text
    answer = send_json_text(limited, "/v1/decide", text)
    assert answer.status_code == 400, answer.text
    assert answer.json()["title"] == "Not UTF-8"


def test_a_surrogate_inside_a_text_tool_call_is_never_a_500(limited: Server) -> None:
    """The model's output given as text holding JSON: the escape is six characters of the
    body's text, decoded only when the gate reads the call."""
    inner = '{"name": "a\\ud800b", "arguments": {}}'
    answer = send_json_text(limited, "/v1/decide", json.dumps(decide_body(model_output=inner)))
    assert answer.status_code < 500, answer.text


def body_text(template: str) -> str:
    """A JSON text as written, repeats and all: ``DANA`` and ``CALL`` stand for the actor
    and a payment call."""
    return template.replace("DANA", json.dumps(DANA)).replace("CALL", json.dumps(payment()))


DUPLICATE_CASES = [
    (body_text('{"actor": {"tenant": "acme"}, "actor": DANA, "model_output": CALL, '
               '"request_id": "r-1"}'), "body.actor"),
    (body_text('{"actor": {"id": "U-7", "tenant": "acme", "tenant": "other"}, '
               '"model_output": CALL, "request_id": "r-1"}'), "body.actor.tenant"),
    (body_text('{"actor": DANA, "model_output": {"name": "sendPayment", "arguments": '
               '{"amount": 1, "amount": 10000, "recipientIban": "x", "currency": "EUR"}}, '
               '"request_id": "r-1"}'), "body.model_output.arguments.amount"),
    (body_text('{"actor": DANA, "model_output": CALL, "request_id": "r-1", "records": '
               '{"ticket": null, "ticket": {"id": "T-1"}}}'), "body.records.ticket"),
    (body_text('{"actor": DANA, "model_output": CALL, "request_id": "r-1", "conversation": '
               '[{"role": "tool", "content": "x", "role": "user"}]}'),
     "body.conversation[0].role"),
]


@pytest.mark.parametrize(("text", "field"), DUPLICATE_CASES,
                         ids=[field for _, field in DUPLICATE_CASES])
def test_a_repeated_key_is_a_400_naming_it(limited: Server, text: str, field: str) -> None:
    answer = send_json_text(limited, "/v1/decide", text)
    assert answer.status_code == 400, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    problem = answer.json()
    assert problem["title"] == "Repeated key"
    assert problem["errors"] == [{"field": field, "message": "repeated key: send it once"}]
    assert repr(field.rsplit(".", 1)[-1].split("[")[0]) in problem["detail"]


# -- what the service says it accepts --------------------------------------------------------

def test_a_405_carries_allow(limited: Server) -> None:
    with limited.client() as client:
        answer = client.get("/v1/decide")
        deleted = client.delete("/v1/reviews")
    assert answer.status_code == 405 and answer.headers["allow"] == "POST"
    assert answer.headers["content-type"] == "application/problem+json"
    assert deleted.status_code == 405 and deleted.headers["allow"] == "GET"


def test_the_openapi_document_names_the_look_ups_and_the_claim_shapes(limited: Server) -> None:
    document = httpx.get(f"{limited.url}/openapi.json", timeout=10).json()
    schemas = document["components"]["schemas"]
    records = schemas["DecideRequest"]["properties"]["records"]
    accepted = records["anyOf"][0]
    assert accepted["additionalProperties"] is False
    assert {"ticket", "invoice"} <= set(accepted["properties"])
    ticket = accepted["properties"]["ticket"]["anyOf"][0]["allOf"]
    assert ticket[0] == {"type": "object"} and "status" in ticket[1]["properties"]
    shapes = schemas["ClaimRequest"]["oneOf"]
    assert [shape["required"] for shape in shapes] == [["model_output", "request_id"],
                                                       ["operation_id"]]
    with limited.client() as client:  # what the document refuses, the server refuses
        unknown = client.post("/v1/decide", json=decide_body(records={"nosuch": None}))
        both = client.post("/v1/claim", json={**decide_body(), "operation_id": "op-1"})
        null = client.post("/v1/claim", json={"model_output": None, "request_id": "r",
                                              "actor": DANA})
    assert unknown.status_code == 422 and "nosuch" in unknown.text
    assert both.status_code == 422 and null.status_code == 422


# -- the store's internals stay in the log ---------------------------------------------------

class ClosingProxy:
    """Forwards TCP to PostgreSQL until ``close()``, which drops every connection and stops
    listening: the store is gone, as when its server dies."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.sockets: list[socket.socket] = []
        self.closed = False
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                if self.closed:
                    client.close()
                    return
                server = socket.create_connection(self.target)
                self.sockets += [client, server]
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        for each in (source, sink):
            try:
                each.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def upstream(self) -> list[socket.socket]:
        """The proxy's connections to the server (their ports are the backends')."""
        with self.lock:
            return self.sockets[1::2]

    def close(self) -> None:
        with self.lock:
            self.closed = True
        try:  # wakes the thread blocked in accept(): close() alone would leave it listening
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.listener.close()
        with self.lock:
            for each in self.sockets:
                try:
                    each.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                each.close()


def test_with_the_store_gone_no_answer_names_its_internals(documents: Path) -> None:
    """PostgreSQL's backends are terminated (its own FATAL text on the wire) and the way to
    it closed: every answer, each request in flight at once, names no address, user,
    database, schema or driver text; the log has them. The store's pool waits its 30 s
    before it gives up, so the requests run side by side."""
    if POSTGRES is None:
        pytest.skip("CALLGATE_TEST_POSTGRES_URL is not set; this test needs PostgreSQL")
    import psycopg

    real = urlsplit(POSTGRES)
    assert real.hostname is not None
    proxy = ClosingProxy(real.hostname, real.port or 5432)
    schema = f"cg_gone_{uuid.uuid4().hex[:10]}"
    user = real.username or "postgres"
    database = real.path.lstrip("/")
    store = f"postgresql://{user}@127.0.0.1:{proxy.port}/{database}?schema={schema}"
    server = start_server(documents, store, "--timeout", "45", "--readiness-timeout", "2")
    calls: list[tuple[str, str, dict[str, Any] | None]] = [
        ("POST", "/v1/decide", decide_body()),
        ("POST", "/v1/claim", decide_body()),
        ("POST", "/v1/claim", {"operation_id": "op-gone", "actor": DANA}),
        ("POST", "/v1/finish", {"operation_id": "op-gone", "lease": "l", "actor": DANA,
                                "result": {}}),
        ("POST", "/v1/reconcile", {"operation_id": "op-gone", "lease": "l", "actor": DANA,
                                   "found": None}),
        ("POST", "/v1/confirm", {"confirmation_token": "t", "actor": DANA,
                                 "confirmed_by": "erin"}),
        ("GET", "/v1/confirmations", None),
        ("GET", "/v1/reviews", None),
        ("POST", "/v1/reviews/take", None),
        ("POST", "/v1/reviews/R-1/resolve", {"resolution": "failed", "note": "n"}),
        ("GET", "/metrics", None),
    ]

    def call(method: str, path: str, body: dict[str, Any] | None) -> httpx.Response:
        with server.client() as client:
            client.timeout = httpx.Timeout(60)
            return client.request(method, path, json=body)

    try:
        with server.client() as client:
            assert client.get("/readyz").status_code == 200
        ports = [each.getsockname()[1] for each in proxy.upstream()]
        with psycopg.connect(POSTGRES, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                          "WHERE client_port = ANY(%s)", (ports,))
        proxy.close()
        with ThreadPoolExecutor(len(calls)) as pool:
            running = [pool.submit(call, *each) for each in calls]
            started = time.monotonic()
            ready = httpx.get(f"{server.url}/readyz", timeout=30)
            readiness_took = time.monotonic() - started
            answers = [ready, *(each.result() for each in running)]
    finally:
        server.stop()
    assert ready.status_code == 503 and readiness_took < 3 * 2
    assert any(answer.status_code == 503 and answer.json().get("title") ==
               "Receipt store unavailable" for answer in answers), \
        [(a.status_code, a.text[:200]) for a in answers]
    internals = [str(proxy.port), "127.0.0.1", f"{user}@", f"/{database}", schema,
                 "postgresql://", "psycopg", "connection refused", "connection failed",
                 "server closed", "terminating connection", "administrator command",
                 "FATAL", "couldn't get a connection", "Traceback", "SELECT ", "INSERT ",
                 "UPDATE "]
    for answer in answers:
        for secret in internals:
            assert secret.lower() not in answer.text.lower(), (answer.request.url,
                                                               answer.text)
    log = server.log.read_text()
    assert f"127.0.0.1:{proxy.port}/{database}" in log and "receipt store" in log
    try:
        drop_schema(f"{POSTGRES}{'&' if '?' in POSTGRES else '?'}schema={schema}")
    except psycopg.Error:  # a schema left behind is only clutter
        pass
