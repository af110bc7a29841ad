"""The receipt store in one SQLite file, shared by threads and processes on one machine.

Every write runs in a ``BEGIN IMMEDIATE`` transaction: it takes the database's write lock
before reading, so deciding from a row and changing it is one atomic step across threads and
processes (the busy timeout makes the others wait instead of failing). WAL mode lets readers
go on while a writer works. ``synchronous=FULL`` because a claim lost on power failure could
let a write run twice.

Times are stored as fixed-width ISO 8601 text in UTC, which sorts and compares as text the
same way as the instants do, and stays readable in the ``sqlite3`` shell.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from callgate_rules.errors import LeaseLost, OperationIdReused, StoreConfigError, StoreError
from callgate_rules.store.base import (
    Claim,
    ClaimOutcome,
    NewOperation,
    NewReviewItem,
    Receipt,
    ReceiptState,
    ReviewItem,
    ReviewStatus,
    as_utc,
    canonical_json,
    check_outcome_state,
    check_resolution,
    claim_outcome,
    lease_lost_message,
    operation_id_reused_message,
    replayed_confirmation_outcome,
    resolved_error_class,
)

# Each entry upgrades the schema by one version; never edit one that has shipped.
MIGRATIONS: list[tuple[int, list[str]]] = [
    (
        1,
        [
            """
            CREATE TABLE callgate_receipts (
                operation_id            TEXT PRIMARY KEY,
                state                   TEXT NOT NULL,
                request_id              TEXT NOT NULL,
                tool                    TEXT NOT NULL,
                contract_version        TEXT NOT NULL,
                args_hash               TEXT NOT NULL,
                arguments               TEXT NOT NULL,
                actor                   TEXT NOT NULL,
                result                  TEXT,
                error_class             TEXT,
                detail                  TEXT,
                confirmed_by            TEXT,
                confirmed_at            TEXT,
                confirmation_expires_at TEXT,
                lease_owner             TEXT,
                lease_expires_at        TEXT,
                attempts                INTEGER NOT NULL DEFAULT 0,
                created_at              TEXT NOT NULL,
                updated_at              TEXT NOT NULL
            )
            """,
            """
            CREATE INDEX callgate_receipts_finished
                ON callgate_receipts (updated_at)
                WHERE state IN ('succeeded', 'failed')
            """,
            """
            CREATE TABLE callgate_reviews (
                queue_position INTEGER PRIMARY KEY AUTOINCREMENT,
                review_id      TEXT NOT NULL UNIQUE,
                tool           TEXT NOT NULL,
                reason         TEXT NOT NULL,
                summary        TEXT NOT NULL,
                operation_id   TEXT,
                payload        TEXT NOT NULL,
                status         TEXT NOT NULL,
                created_at     TEXT NOT NULL,
                taken_by       TEXT,
                taken_at       TEXT,
                resolution     TEXT,
                note           TEXT,
                resolved_by    TEXT,
                resolved_at    TEXT
            )
            """,
            """
            CREATE INDEX callgate_reviews_queue
                ON callgate_reviews (status, created_at, queue_position)
            """,
        ],
    ),
]
SCHEMA_VERSION = MIGRATIONS[-1][0]


class SqliteStore:
    """A ``ReceiptStore`` in the SQLite file at ``path``; the file is created if missing.

    One connection per thread, so a store object may be shared by threads; separate
    processes open their own store on the same file.
    """

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout: float = 30.0) -> None:
        self.path = os.path.abspath(os.fspath(path))
        self.url = f"sqlite:///{self.path}"
        self._busy_timeout = busy_timeout
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        self._closed = False
        try:
            # WAL is a property of the file: set once here, every later connection uses it.
            self._connection().execute("PRAGMA journal_mode=WAL")
            self.migrate()
        except StoreConfigError:
            self.close()
            raise
        except (sqlite3.Error, StoreError) as exc:
            self.close()
            raise StoreConfigError(_open_failure(self.url, exc)) from None

    def migrate(self) -> list[int]:
        """Apply the migrations this file has not seen yet; return their versions."""
        # Checked without the write lock first, so opening an up-to-date file never waits
        # for a writer.
        if self._schema_version() == SCHEMA_VERSION:
            return []
        with self._write() as connection:
            connection.execute(
                """
                CREATE TABLE IF NOT EXISTS callgate_schema_version (
                    version    INTEGER PRIMARY KEY,
                    applied_at TEXT NOT NULL
                )
                """
            )
            (current,) = connection.execute(
                "SELECT coalesce(max(version), 0) FROM callgate_schema_version"
            ).fetchone()
            if current > SCHEMA_VERSION:
                raise StoreConfigError(
                    f"cannot open receipt store {self.url}: its schema version {current} is "
                    f"newer than this callgate supports ({SCHEMA_VERSION}); upgrade callgate"
                )
            applied = []
            for version, statements in MIGRATIONS:
                if version <= current:
                    continue
                for statement in statements:
                    connection.execute(statement)
                connection.execute(
                    "INSERT INTO callgate_schema_version (version, applied_at) VALUES (?, ?)",
                    (version, _text(datetime.now().astimezone())),
                )
                applied.append(version)
            return applied

    def _schema_version(self) -> int:
        with self._read() as connection:
            table = connection.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                ("callgate_schema_version",),
            ).fetchone()
            if table is None:
                return 0
            (version,) = connection.execute(
                "SELECT coalesce(max(version), 0) FROM callgate_schema_version"
            ).fetchone()
            return int(version)

    # Receipts ------------------------------------------------------------------------------

    def claim(
        self, op: NewOperation, *, worker: str, lease: timedelta, now: datetime
    ) -> Claim:
        now = as_utc(now)
        with self._write() as connection:
            existing = _select_receipt(connection, op.operation_id)
            if existing is None:
                connection.execute(
                    """
                    INSERT INTO callgate_receipts (
                        operation_id, state, request_id, tool, contract_version, args_hash,
                        arguments, actor, lease_owner, lease_expires_at, attempts,
                        created_at, updated_at
                    ) VALUES (?, 'claimed', ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)
                    """,
                    (
                        op.operation_id, op.request_id, op.tool, op.contract_version,
                        op.args_hash, canonical_json(op.arguments), canonical_json(op.actor),
                        worker, _text(now + lease), _text(now), _text(now),
                    ),
                )
                return Claim(ClaimOutcome.CLAIMED, _fetch_receipt(connection, op.operation_id))
            if existing.args_hash != op.args_hash:
                raise OperationIdReused(operation_id_reused_message(existing, op))
            outcome = claim_outcome(existing, now=now)
            if outcome in (ClaimOutcome.BUSY, ClaimOutcome.EXISTING):
                return Claim(outcome, existing)
            connection.execute(
                """
                UPDATE callgate_receipts
                SET state = 'claimed', lease_owner = ?, lease_expires_at = ?,
                    attempts = attempts + 1, updated_at = ?
                WHERE operation_id = ?
                """,
                (worker, _text(now + lease), _text(now), op.operation_id),
            )
            return Claim(outcome, _fetch_receipt(connection, op.operation_id))

    def renew(self, operation_id: str, *, worker: str, lease: timedelta, now: datetime) -> Receipt:
        now = as_utc(now)
        with self._write() as connection:
            changed = connection.execute(
                """
                UPDATE callgate_receipts
                SET lease_expires_at = ?, updated_at = ?
                WHERE operation_id = ? AND state = 'claimed' AND lease_owner = ?
                """,
                (_text(now + lease), _text(now), operation_id, worker),
            ).rowcount
            if changed != 1:
                raise LeaseLost(lease_lost_message(operation_id, worker))
            return _fetch_receipt(connection, operation_id)

    def finish(
        self,
        operation_id: str,
        *,
        worker: str,
        state: ReceiptState,
        now: datetime,
        result: Any = None,
        error_class: str | None = None,
        detail: str | None = None,
    ) -> Receipt:
        check_outcome_state(state)
        now = as_utc(now)
        with self._write() as connection:
            changed = connection.execute(
                """
                UPDATE callgate_receipts
                SET state = ?, result = ?, error_class = ?, detail = ?,
                    lease_owner = NULL, lease_expires_at = NULL, updated_at = ?
                WHERE operation_id = ? AND state = 'claimed' AND lease_owner = ?
                """,
                (
                    state.value, _json_or_null(result), error_class, detail, _text(now),
                    operation_id, worker,
                ),
            ).rowcount
            if changed != 1:
                raise LeaseLost(lease_lost_message(operation_id, worker))
            return _fetch_receipt(connection, operation_id)

    def hold_for_confirmation(
        self, op: NewOperation, *, expires_at: datetime, now: datetime
    ) -> Receipt:
        now = as_utc(now)
        with self._write() as connection:
            existing = _select_receipt(connection, op.operation_id)
            if existing is not None:
                if existing.args_hash != op.args_hash:
                    raise OperationIdReused(operation_id_reused_message(existing, op))
                return existing
            connection.execute(
                """
                INSERT INTO callgate_receipts (
                    operation_id, state, request_id, tool, contract_version, args_hash,
                    arguments, actor, confirmation_expires_at, created_at, updated_at
                ) VALUES (?, 'awaiting_confirmation', ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
                (
                    op.operation_id, op.request_id, op.tool, op.contract_version, op.args_hash,
                    canonical_json(op.arguments), canonical_json(op.actor), _text(expires_at),
                    _text(now), _text(now),
                ),
            )
            return _fetch_receipt(connection, op.operation_id)

    def claim_confirmed(
        self,
        operation_id: str,
        *,
        confirmed_by: str,
        worker: str,
        lease: timedelta,
        now: datetime,
    ) -> Claim:
        now = as_utc(now)
        with self._write() as connection:
            existing = _select_receipt(connection, operation_id)
            if existing is None:
                raise StoreError(f"no receipt for operation {operation_id!r} to confirm")
            if existing.state is not ReceiptState.AWAITING_CONFIRMATION:
                return Claim(replayed_confirmation_outcome(existing, now=now), existing)
            connection.execute(
                """
                UPDATE callgate_receipts
                SET state = 'claimed', confirmed_by = ?, confirmed_at = ?, lease_owner = ?,
                    lease_expires_at = ?, attempts = attempts + 1, updated_at = ?
                WHERE operation_id = ?
                """,
                (confirmed_by, _text(now), worker, _text(now + lease), _text(now), operation_id),
            )
            return Claim(ClaimOutcome.CLAIMED, _fetch_receipt(connection, operation_id))

    def get(self, operation_id: str) -> Receipt | None:
        with self._read() as connection:
            return _select_receipt(connection, operation_id)

    # Review queue --------------------------------------------------------------------------

    def open_review(self, item: NewReviewItem, *, now: datetime) -> ReviewItem:
        now = as_utc(now)
        review_id = str(uuid.uuid4())
        with self._write() as connection:
            connection.execute(
                """
                INSERT INTO callgate_reviews (
                    review_id, tool, reason, summary, operation_id, payload, status, created_at
                ) VALUES (?, ?, ?, ?, ?, ?, 'open', ?)
                """,
                (
                    review_id, item.tool, item.reason, item.summary, item.operation_id,
                    canonical_json(item.payload), _text(now),
                ),
            )
            if item.operation_id is not None:
                connection.execute(
                    """
                    UPDATE callgate_receipts
                    SET state = 'in_review', lease_owner = NULL, lease_expires_at = NULL,
                        updated_at = ?
                    WHERE operation_id = ?
                    """,
                    (_text(now), item.operation_id),
                )
            return _fetch_review(connection, review_id)

    def list_reviews(self, *, status: ReviewStatus | None = None) -> list[ReviewItem]:
        with self._read() as connection:
            rows = connection.execute(
                """
                SELECT * FROM callgate_reviews
                WHERE :status IS NULL OR status = :status
                ORDER BY created_at, queue_position
                """,
                {"status": None if status is None else status.value},
            ).fetchall()
            return [_review(row) for row in rows]

    def take_review(self, *, reviewer: str, now: datetime) -> ReviewItem | None:
        now = as_utc(now)
        with self._write() as connection:
            oldest = connection.execute(
                """
                SELECT review_id FROM callgate_reviews
                WHERE status = 'open'
                ORDER BY created_at, queue_position
                LIMIT 1
                """
            ).fetchone()
            if oldest is None:
                return None
            connection.execute(
                """
                UPDATE callgate_reviews
                SET status = 'taken', taken_by = ?, taken_at = ?
                WHERE review_id = ?
                """,
                (reviewer, _text(now), oldest["review_id"]),
            )
            return _fetch_review(connection, oldest["review_id"])

    def resolve_review(
        self, review_id: str, *, resolution: str, note: str, by: str, now: datetime
    ) -> ReviewItem:
        check_resolution(resolution)
        now = as_utc(now)
        with self._write() as connection:
            row = connection.execute(
                "SELECT * FROM callgate_reviews WHERE review_id = ?", (review_id,)
            ).fetchone()
            if row is None:
                raise StoreError(f"no review item {review_id!r}")
            review = _review(row)
            if review.status is ReviewStatus.RESOLVED:
                raise StoreError(f"review item {review_id!r} is already resolved")
            connection.execute(
                """
                UPDATE callgate_reviews
                SET status = 'resolved', resolution = ?, note = ?, resolved_by = ?,
                    resolved_at = ?
                WHERE review_id = ?
                """,
                (resolution, note, by, _text(now), review_id),
            )
            if review.operation_id is not None:
                connection.execute(
                    """
                    UPDATE callgate_receipts
                    SET state = ?, error_class = ?, detail = ?, lease_owner = NULL,
                        lease_expires_at = NULL, updated_at = ?
                    WHERE operation_id = ?
                    """,
                    (
                        resolution, resolved_error_class(resolution, review.reason), note,
                        _text(now), review.operation_id,
                    ),
                )
            return _fetch_review(connection, review_id)

    # Housekeeping --------------------------------------------------------------------------

    def purge(self, *, older_than: datetime) -> int:
        cutoff = _text(older_than)
        with self._write() as connection:
            receipts = connection.execute(
                """
                DELETE FROM callgate_receipts
                WHERE state IN ('succeeded', 'failed') AND updated_at < ?
                """,
                (cutoff,),
            ).rowcount
            reviews = connection.execute(
                "DELETE FROM callgate_reviews WHERE status = 'resolved' AND resolved_at < ?",
                (cutoff,),
            ).rowcount
            return receipts + reviews

    def close(self) -> None:
        with self._connections_lock:
            self._closed = True
            connections, self._connections = self._connections, []
        for connection in connections:
            connection.close()

    # Connections and transactions ----------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is not None and not self._closed:
            return connection
        with self._connections_lock:
            if self._closed:
                raise StoreError(f"the receipt store {self.url} is closed")
            # isolation_level=None: transactions are ours (BEGIN IMMEDIATE), not the module's.
            # check_same_thread=False only so close() may close every thread's connection.
            connection = sqlite3.connect(
                self.path,
                isolation_level=None,
                check_same_thread=False,
                timeout=self._busy_timeout,
            )
            self._connections.append(connection)
        connection.row_factory = sqlite3.Row
        connection.execute("PRAGMA synchronous=FULL")
        self._local.connection = connection
        return connection

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._errors_as_store_errors():
            connection = self._connection()
            connection.execute("BEGIN IMMEDIATE")
            try:
                yield connection
                connection.execute("COMMIT")
            except BaseException:
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
                raise

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        with self._errors_as_store_errors():
            yield self._connection()

    @contextmanager
    def _errors_as_store_errors(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            raise StoreError(f"receipt store {self.url}: {exc}") from exc


def _open_failure(url: str, exc: Exception) -> str:
    reason = str(exc.__cause__ if isinstance(exc.__cause__, sqlite3.Error) else exc)
    if "unable to open database file" in reason:
        reason += " — does the directory exist and may this user write to it?"
    return f"cannot open receipt store {url}: {reason}"


def _text(moment: datetime) -> str:
    return as_utc(moment).isoformat(timespec="microseconds")


def _time(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


def _required_time(text: str) -> datetime:
    return datetime.fromisoformat(text)


def _json_or_null(value: Any) -> str | None:
    return None if value is None else canonical_json(value)


def _select_receipt(connection: sqlite3.Connection, operation_id: str) -> Receipt | None:
    row = connection.execute(
        "SELECT * FROM callgate_receipts WHERE operation_id = ?", (operation_id,)
    ).fetchone()
    return None if row is None else _receipt(row)


def _fetch_receipt(connection: sqlite3.Connection, operation_id: str) -> Receipt:
    receipt = _select_receipt(connection, operation_id)
    if receipt is None:
        raise StoreError(f"receipt {operation_id!r} vanished inside its own transaction")
    return receipt


def _fetch_review(connection: sqlite3.Connection, review_id: str) -> ReviewItem:
    row = connection.execute(
        "SELECT * FROM callgate_reviews WHERE review_id = ?", (review_id,)
    ).fetchone()
    if row is None:
        raise StoreError(f"review item {review_id!r} vanished inside its own transaction")
    return _review(row)


def _receipt(row: sqlite3.Row) -> Receipt:
    return Receipt(
        operation_id=row["operation_id"],
        state=ReceiptState(row["state"]),
        request_id=row["request_id"],
        tool=row["tool"],
        contract_version=row["contract_version"],
        args_hash=row["args_hash"],
        arguments=json.loads(row["arguments"]),
        actor=json.loads(row["actor"]),
        created_at=_required_time(row["created_at"]),
        updated_at=_required_time(row["updated_at"]),
        result=None if row["result"] is None else json.loads(row["result"]),
        error_class=row["error_class"],
        detail=row["detail"],
        confirmed_by=row["confirmed_by"],
        confirmed_at=_time(row["confirmed_at"]),
        confirmation_expires_at=_time(row["confirmation_expires_at"]),
        lease_owner=row["lease_owner"],
        lease_expires_at=_time(row["lease_expires_at"]),
        attempts=row["attempts"],
    )


def _review(row: sqlite3.Row) -> ReviewItem:
    return ReviewItem(
        review_id=row["review_id"],
        tool=row["tool"],
        reason=row["reason"],
        summary=row["summary"],
        operation_id=row["operation_id"],
        payload=json.loads(row["payload"]),
        status=ReviewStatus(row["status"]),
        created_at=_required_time(row["created_at"]),
        taken_by=row["taken_by"],
        taken_at=_time(row["taken_at"]),
        resolution=row["resolution"],
        note=row["note"],
        resolved_by=row["resolved_by"],
        resolved_at=_time(row["resolved_at"]),
    )


