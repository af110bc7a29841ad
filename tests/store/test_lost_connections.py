"""PostgreSQL connections lost under the write path: checked without a round trip, and a
statement whose connection is lost is sent once more only where that is safe.

The pool lends a connection after one ``select`` on its socket (a connection the server
closed is readable); a claim or finish whose connection is lost after that is sent again on
a fresh one. The connections go through a small TCP proxy that can lose one request or one
reply, so each case happens for real, at the byte where it matters.
"""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from callgate_rules.errors import LeaseLost
from callgate_rules.store import ClaimOutcome, PostgresStore, ReceiptState
from callgate_rules.store.rows import Rows
from tests.store.test_store_contract import LEASE, T0, operation


class LosingProxy:
    """Forwards TCP to the server; ``lose("request")`` or ``lose("reply")`` makes the next
    bytes in that direction close the connection instead of arriving."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.connections = 0
        self._losing: str | None = None
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def lose(self, direction: str) -> None:
        with self._lock:
            self._losing = direction

    def _lose_now(self, direction: str) -> bool:
        with self._lock:
            if self._losing != direction:
                return False
            self._losing = None
            return True

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            self.connections += 1
            for source, sink, direction in ((client, server, "request"),
                                            (server, client, "reply")):
                threading.Thread(target=self._pump, args=(source, sink, direction, client,
                                                          server), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, direction: str,
              *both: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                if self._lose_now(direction):
                    break
                sink.sendall(data)
        except OSError:
            pass
        for end in both:
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            end.close()

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def proxied(postgres_url: str, postgres_schema: str) -> Iterator[tuple[PostgresStore, LosingProxy]]:
    parts = urlsplit(postgres_url)
    proxy = LosingProxy(parts.hostname or "127.0.0.1", parts.port or 5432)
    netloc = f"{parts.username}@127.0.0.1:{proxy.port}" if parts.username else (
        f"127.0.0.1:{proxy.port}")
    store = PostgresStore(urlunsplit(parts._replace(netloc=netloc)), schema=postgres_schema,
                          max_connections=1)
    yield store, proxy
    store.close()
    proxy.close()


def watched(store: PostgresStore, name: str) -> list[Any]:
    """Record what ``store._rows.<name>`` returns (what it does is unchanged)."""
    calls: list[Any] = []
    original: Callable[..., Any] = getattr(store._rows, name)

    class Watched(Rows):
        __slots__ = ()

    def recording(_self: Rows, *args: Any) -> Any:
        calls.append(answer := original(*args))
        return answer

    setattr(Watched, name, recording)
    store._rows = Watched(store._rows.time, store._rows.json_value, store._rows.written_json)
    return calls


def test_a_finish_whose_reply_was_lost_returns_the_receipt_it_wrote(
    proxied: tuple[PostgresStore, LosingProxy],
) -> None:
    store, proxy = proxied
    operation_id = f"lost-reply-{uuid.uuid4().hex[:8]}"
    store.claim(operation(operation_id), worker="w1", lease=LEASE, now=T0)
    landed = watched(store, "is_finish_of")
    opened = proxy.connections

    proxy.lose("reply")  # the UPDATE commits; its answer never arrives
    done = store.finish(operation_id, worker="w1", state=ReceiptState.SUCCEEDED, now=T0,
                        result={"refund_id": "R-1"})

    assert landed == [True]  # sent again, matched nothing, and the row was ours
    assert done == store.get(operation_id)
    assert (done.state, done.result, done.lease_owner) == (
        ReceiptState.SUCCEEDED, {"refund_id": "R-1"}, None)
    assert proxy.connections == opened + 1  # the lost one replaced, once


def test_a_finish_whose_request_was_lost_is_written_on_a_fresh_connection(
    proxied: tuple[PostgresStore, LosingProxy],
) -> None:
    store, proxy = proxied
    operation_id = f"lost-request-{uuid.uuid4().hex[:8]}"
    store.claim(operation(operation_id), worker="w1", lease=LEASE, now=T0)
    landed = watched(store, "is_finish_of")

    proxy.lose("request")  # the UPDATE never reaches the server
    done = store.finish(operation_id, worker="w1", state=ReceiptState.FAILED, now=T0,
                        error_class="transient", detail="503")

    assert landed == []  # the second UPDATE matched the claim itself
    assert done == store.get(operation_id)
    assert (done.state, done.error_class, done.detail) == (ReceiptState.FAILED, "transient",
                                                          "503")


def test_a_finish_after_a_same_name_take_over_whose_reply_was_lost_returns_its_row(
    proxied: tuple[PostgresStore, LosingProxy], postgres_url: str, postgres_schema: str,
) -> None:
    """The finish of a claim another store object took over under the same worker name
    misses the attempt's fence and finishes as any finish does; when that finish lands and
    its reply is lost, the row read back is its own, at the take-over's attempt."""
    store, proxy = proxied
    operation_id = f"lost-same-name-{uuid.uuid4().hex[:8]}"
    store.claim(operation(operation_id), worker="w1", lease=LEASE, now=T0)
    other = PostgresStore(postgres_url, schema=postgres_schema)
    try:
        taken = other.claim(operation(operation_id), worker="w1", lease=LEASE,
                            now=T0 + 2 * LEASE)
    finally:
        other.close()
    assert (taken.outcome, taken.receipt.attempts) == (ClaimOutcome.RECONCILE, 2)
    general, send = store._sql.finish.statement, store._send

    def losing_the_general_finish_reply(query: Any, parameters: Any, *, again: bool) -> Any:
        if query is general and not again:
            proxy.lose("reply")  # the general finish commits; its answer never arrives
        return send(query, parameters, again=again)

    store._send = losing_the_general_finish_reply  # type: ignore[method-assign]
    done = store.finish(operation_id, worker="w1", state=ReceiptState.SUCCEEDED,
                        now=T0 + 3 * LEASE, result={"by": "w1"})

    assert done == store.get(operation_id)
    assert (done.state, done.result, done.attempts, done.lease_owner) == (
        ReceiptState.SUCCEEDED, {"by": "w1"}, 2, None)


def test_a_finish_sent_again_never_overwrites_another_holder(
    proxied: tuple[PostgresStore, LosingProxy],
) -> None:
    store, proxy = proxied
    operation_id = f"lost-taken-{uuid.uuid4().hex[:8]}"
    store.claim(operation(operation_id), worker="w1", lease=LEASE, now=T0)
    taken = store.claim(operation(operation_id), worker="w2", lease=LEASE, now=T0 + LEASE * 2)
    assert taken.outcome is ClaimOutcome.RECONCILE

    proxy.lose("request")
    with pytest.raises(LeaseLost):
        store.finish(operation_id, worker="w1", state=ReceiptState.SUCCEEDED, now=T0,
                     result={"late": True})
    receipt = store.get(operation_id)
    assert receipt is not None and (receipt.state, receipt.lease_owner) == (
        ReceiptState.CLAIMED, "w2")


def test_a_claim_whose_reply_was_lost_makes_no_second_holder(
    proxied: tuple[PostgresStore, LosingProxy],
) -> None:
    store, proxy = proxied
    operation_id = f"lost-claim-{uuid.uuid4().hex[:8]}"

    proxy.lose("reply")  # the INSERT commits; its answer never arrives
    claim = store.claim(operation(operation_id), worker="w1", lease=LEASE, now=T0)

    # Sent again, the INSERT creates nothing; the row is decided like anyone's: its lease is
    # live, so the caller must wait, and nobody executes until it expires and is reconciled.
    assert claim.outcome is ClaimOutcome.BUSY
    assert (claim.receipt.lease_owner, claim.receipt.attempts) == ("w1", 1)
    later = store.claim(operation(operation_id), worker="w1", lease=LEASE, now=T0 + LEASE)
    assert later.outcome is ClaimOutcome.RECONCILE


def test_a_claim_whose_request_was_lost_is_claimed_on_a_fresh_connection(
    proxied: tuple[PostgresStore, LosingProxy],
) -> None:
    store, proxy = proxied
    operation_id = f"lost-claim-request-{uuid.uuid4().hex[:8]}"

    proxy.lose("request")
    claim = store.claim(operation(operation_id), worker="w1", lease=LEASE, now=T0)

    assert claim.outcome is ClaimOutcome.CLAIMED
    assert claim.receipt == store.get(operation_id)


def test_a_healthy_connection_is_lent_without_a_round_trip(
    proxied: tuple[PostgresStore, LosingProxy], monkeypatch: pytest.MonkeyPatch,
) -> None:
    from psycopg_pool import ConnectionPool

    store, _ = proxied
    asked: list[object] = []
    check = ConnectionPool.check_connection
    monkeypatch.setattr(ConnectionPool, "check_connection",
                        staticmethod(lambda connection: (asked.append(connection),
                                                         check(connection))[1]))
    import callgate_rules.store.postgres as postgres

    looked: list[int] = []
    readable = postgres._readable
    monkeypatch.setattr(postgres, "_readable",
                        lambda descriptor: (looked.append(descriptor), readable(descriptor))[1])
    operation_id = f"healthy-{uuid.uuid4().hex[:8]}"
    store.claim(operation(operation_id), worker="w1", lease=LEASE, now=T0)
    store.finish(operation_id, worker="w1", state=ReceiptState.SUCCEEDED, now=T0, result=1)

    assert len(looked) == 2  # each loan looked at the socket...
    assert asked == []  # ...and asked the server nothing


def test_a_connection_the_server_ended_while_idle_is_asked_and_replaced(
    postgres_url: str, postgres_schema: str, postgres_admin: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from psycopg_pool import ConnectionPool

    name = f"callgate_idle_{uuid.uuid4().hex[:8]}"
    separator = "&" if "?" in postgres_url else "?"
    store = PostgresStore(f"{postgres_url}{separator}application_name={name}",
                          schema=postgres_schema, max_connections=1)
    asked: list[object] = []
    check = ConnectionPool.check_connection
    monkeypatch.setattr(ConnectionPool, "check_connection",
                        staticmethod(lambda connection: (asked.append(connection),
                                                         check(connection))[1]))
    try:
        (lent,) = [store._pool.getconn()]
        store._pool.putconn(lent)
        postgres_admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                               "WHERE application_name = %s", (name,))
        wait_until_readable(lent.fileno())
        operation_id = f"idle-{uuid.uuid4().hex[:8]}"
        claim = store.claim(operation(operation_id), worker="w1", lease=LEASE, now=T0)
    finally:
        store.close()

    assert claim.outcome is ClaimOutcome.CLAIMED
    assert asked  # the closed one was asked (and failed), so the pool lent a new one


def wait_until_readable(descriptor: int) -> None:
    import select

    deadline = time.monotonic() + 10
    while not select.select([descriptor], [], [], 0.05)[0]:
        assert time.monotonic() < deadline, "the server never closed the connection"


def test_a_pool_with_no_connection_to_lend_is_waited_for_once(
    postgres_url: str, postgres_schema: str,
) -> None:
    from psycopg_pool import PoolTimeout

    from callgate_rules.errors import StoreError

    store = PostgresStore(postgres_url, schema=postgres_schema, max_connections=1)
    store._pool.timeout = 0.2
    held = store._pool.getconn()  # the only connection, lent elsewhere
    lend = store._pool.getconn
    asked: list[object] = []

    def counted_lend(*args: Any, **kwargs: Any) -> Any:
        asked.append(args)
        return lend(*args, **kwargs)

    store._pool.getconn = counted_lend  # type: ignore[method-assign]
    try:
        with pytest.raises(StoreError) as raised:
            store.claim(operation(f"starved-{uuid.uuid4().hex[:8]}"), worker="w1",
                        lease=LEASE, now=T0)
    finally:
        store._pool.getconn = lend  # type: ignore[method-assign]
        store._pool.putconn(held)
        store.close()
    assert isinstance(raised.value.__cause__, PoolTimeout)
    assert len(asked) == 1  # waited for once: nothing was sent, so nothing is sent again


def test_a_connection_on_a_descriptor_above_1023_is_lent(
    postgres_url: str, postgres_schema: str,
) -> None:
    import os
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if min(soft if soft != resource.RLIM_INFINITY else 4096,
           hard if hard != resource.RLIM_INFINITY else 4096) < 1200:
        pytest.skip(f"the open-files limit ({soft}, {hard}) leaves no descriptor above 1023")
    if soft != resource.RLIM_INFINITY and soft < 1200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (1200, hard))
    # A busy process (many sockets, files) opens its database connections above 1023,
    # where select() refuses them: the check must not.
    fillers = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        store = PostgresStore(postgres_url, schema=postgres_schema, max_connections=1)
        try:
            lent = store._pool.getconn()
            descriptor = lent.fileno()
            store._pool.putconn(lent)
            operation_id = f"high-{uuid.uuid4().hex[:8]}"
            claim = store.claim(operation(operation_id), worker="w1", lease=LEASE, now=T0)
        finally:
            store.close()
    finally:
        for filler in fillers:
            os.close(filler)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert descriptor > 1023
    assert claim.outcome is ClaimOutcome.CLAIMED


def test_another_holders_finish_at_the_same_instant_is_not_taken_for_ours(
    proxied: tuple[PostgresStore, LosingProxy], postgres_url: str, postgres_schema: str,
) -> None:
    store, proxy = proxied  # worker w1's store, through the proxy
    operation_id = f"lost-other-{uuid.uuid4().hex[:8]}"
    store.claim(operation(operation_id), worker="w1", lease=LEASE, now=T0)
    other = PostgresStore(postgres_url, schema=postgres_schema)  # w2, in another process
    try:
        taken = other.claim(operation(operation_id), worker="w2", lease=LEASE,
                            now=T0 + LEASE * 2)
        assert taken.outcome is ClaimOutcome.RECONCILE
        other.finish(operation_id, worker="w2", state=ReceiptState.SUCCEEDED,
                     now=T0 + LEASE * 3, result={"by": "w2"})
    finally:
        other.close()

    proxy.lose("request")  # w1's late finish: the same outcome, at the same instant
    with pytest.raises(LeaseLost):
        store.finish(operation_id, worker="w1", state=ReceiptState.SUCCEEDED,
                     now=T0 + LEASE * 3, result={"by": "w1"})
    receipt = store.get(operation_id)
    assert receipt is not None and (receipt.result, receipt.attempts) == ({"by": "w2"}, 2)


def test_a_statement_that_failed_on_a_live_connection_is_not_sent_again(
    postgres_url: str, postgres_schema: str, postgres_admin: Any,
) -> None:
    import psycopg

    from callgate_rules.errors import StoreError

    operation_id = f"timed-out-{uuid.uuid4().hex[:8]}"
    separator = "&" if "?" in postgres_url else "?"
    store = PostgresStore(f"{postgres_url}{separator}options=-c%20statement_timeout%3D300",
                          schema=postgres_schema)
    sent: list[object] = []
    statement = store._statement

    def counted() -> Any:
        sent.append(None)
        return statement()

    store._statement = counted  # type: ignore[method-assign]
    with psycopg.connect(postgres_url) as blocker:  # inserts the same ID, uncommitted
        blocker.execute(f'SET search_path TO "{postgres_schema}"')
        blocker.execute(
            "INSERT INTO callgate_receipts (operation_id, state, request_id, tool, "
            "contract_version, args_hash, arguments, actor, attempts, created_at, updated_at)"
            " VALUES (%s, 'claimed', 'r', 't', '1', 'h', '{}', '{}', 1, now(), now())",
            (operation_id,))
        try:
            with pytest.raises(StoreError) as raised:
                store.claim(operation(operation_id), worker="w1", lease=LEASE, now=T0)
        finally:
            blocker.rollback()
            store.close()
    assert getattr(raised.value.__cause__, "sqlstate", None) == "57014"  # query canceled
    assert len(sent) == 1  # a live connection answered: no doubt whether it ran
