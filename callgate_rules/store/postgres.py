"""The receipt store in PostgreSQL, shared by any number of hosts.

Atomicity comes from the database: the primary key plus ``INSERT ... ON CONFLICT DO NOTHING``
decides who creates a receipt, ``SELECT ... FOR UPDATE`` holds a row while the state machine
decides, conditional ``UPDATE ... RETURNING`` fences workers that lost their lease, and
``FOR UPDATE SKIP LOCKED`` hands each review item to one reviewer.

psycopg is optional: it is imported when a store is opened, never when callgate is.
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

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

if TYPE_CHECKING:
    from psycopg import Connection, Cursor
    from psycopg_pool import ConnectionPool

INSTALL_HINT = "PostgreSQL support needs: pip install 'callgate-rules[postgres]'"

# Each entry upgrades the schema by one version; never edit one that has shipped.
MIGRATIONS: list[tuple[int, list[str]]] = [
    (
        1,
        [
            """
            CREATE TABLE callgate_receipts (
                operation_id            text PRIMARY KEY,
                state                   text NOT NULL CHECK (state IN (
                                            'claimed', 'succeeded', 'failed', 'outcome_unknown',
                                            'awaiting_confirmation', 'in_review')),
                request_id              text NOT NULL,
                tool                    text NOT NULL,
                contract_version        text NOT NULL,
                args_hash               text NOT NULL,
                arguments               jsonb NOT NULL,
                actor                   jsonb NOT NULL,
                result                  jsonb,
                error_class             text,
                detail                  text,
                confirmed_by            text,
                confirmed_at            timestamptz,
                confirmation_expires_at timestamptz,
                lease_owner             text,
                lease_expires_at        timestamptz,
                attempts                integer NOT NULL DEFAULT 0,
                created_at              timestamptz NOT NULL,
                updated_at              timestamptz NOT NULL
            )
            """,
            """
            CREATE INDEX callgate_receipts_finished
                ON callgate_receipts (updated_at)
                WHERE state IN ('succeeded', 'failed')
            """,
            """
            CREATE TABLE callgate_reviews (
                review_id      text PRIMARY KEY,
                queue_position bigint GENERATED ALWAYS AS IDENTITY,
                tool           text NOT NULL,
                reason         text NOT NULL,
                summary        text NOT NULL,
                operation_id   text,
                payload        jsonb NOT NULL,
                status         text NOT NULL CHECK (status IN ('open', 'taken', 'resolved')),
                created_at     timestamptz NOT NULL,
                taken_by       text,
                taken_at       timestamptz,
                resolution     text CHECK (resolution IN ('succeeded', 'failed')),
                note           text,
                resolved_by    text,
                resolved_at    timestamptz
            )
            """,
            """
            CREATE INDEX callgate_reviews_queue
                ON callgate_reviews (created_at, queue_position)
                WHERE status = 'open'
            """,
        ],
    ),
]
SCHEMA_VERSION = MIGRATIONS[-1][0]

# First key of the advisory lock that serializes migrations (the second is the schema's hash).
MIGRATION_LOCK_KEY = 0x6361_6C6C  # "call"

DATA_TABLES = ("callgate_receipts", "callgate_reviews")
REQUIRED_PRIVILEGES = ("SELECT", "INSERT", "UPDATE", "DELETE")

_SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
_PASSWORD_PARAMETER = re.compile(r"(password\s*=\s*)('[^']*'|\S+)", re.IGNORECASE)


def redact_url(url: str) -> str:
    """``url`` without its password (in the user part or a ``password=`` parameter)."""
    parts = urlsplit(url)
    if not parts.scheme or not parts.netloc:
        return _PASSWORD_PARAMETER.sub(r"\1***", url)
    userinfo, at, hosts = parts.netloc.rpartition("@")
    netloc = f"{userinfo.partition(':')[0]}{at}{hosts}"
    query = urlencode(
        [(key, value) for key, value in parse_qsl(parts.query) if key.lower() != "password"]
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


class PostgresStore:
    """A ``ReceiptStore`` in the PostgreSQL database at ``url``.

    ``schema`` names a PostgreSQL schema to keep the tables in (created if missing), so
    several deployments or test runs can share one database. Opening runs pending
    migrations and checks privileges, so a bad URL, a server that is down, a missing
    database or missing privileges fail here with a one-line ``StoreConfigError``.
    """

    def __init__(
        self,
        url: str,
        *,
        schema: str | None = None,
        min_connections: int = 1,
        max_connections: int = 10,
        connect_timeout: float = 5.0,
    ) -> None:
        self.url = redact_url(url)
        self.schema = schema
        if schema is not None and not _SCHEMA_NAME.fullmatch(schema):
            raise StoreConfigError(
                f"cannot open receipt store {self.url}: schema name {schema!r} must be letters, "
                "digits and underscores, starting with a letter or underscore"
            )
        try:
            import psycopg
            from psycopg.rows import dict_row
            from psycopg_pool import ConnectionPool
        except ImportError:
            raise StoreConfigError(INSTALL_HINT) from None
        self._driver_error: type[Exception] = psycopg.Error
        connection_options: dict[str, Any] = {
            "autocommit": True,
            "row_factory": dict_row,
            # libpq counts whole seconds and treats anything below 2 as 2.
            "connect_timeout": max(2, math.ceil(connect_timeout)),
        }
        if "application_name" not in psycopg.conninfo.conninfo_to_dict(url):
            connection_options["application_name"] = "callgate"
        try:
            with psycopg.connect(url, **connection_options) as probe:
                self._configure(probe)
                self._migrate(probe)
                self._check_privileges(probe)
        except psycopg.Error as exc:
            raise StoreConfigError(_open_failure(self.url, exc)) from None
        self._pool: ConnectionPool[Any] = ConnectionPool(
            url,
            kwargs=connection_options,
            min_size=min_connections,
            max_size=max_connections,
            configure=self._configure,
            # A connection the server dropped while idle is replaced instead of failing a call.
            check=ConnectionPool.check_connection,
            open=False,
            name=f"callgate {self.url}",
        )
        try:
            self._pool.open(wait=True, timeout=connect_timeout)
        except psycopg.Error as exc:
            self._pool.close()
            raise StoreConfigError(_open_failure(self.url, exc)) from None

    def migrate(self) -> list[int]:
        """Apply the migrations this database has not seen yet; return their versions."""
        with self._errors_as_store_errors(), self._pool.connection() as connection:
            return self._migrate(connection)

    # Receipts ------------------------------------------------------------------------------

    def claim(
        self, op: NewOperation, *, worker: str, lease: timedelta, now: datetime
    ) -> Claim:
        now = as_utc(now)
        # A receipt purged between the INSERT and the SELECT sends us round once more.
        for _ in range(3):
            with self._transaction() as cursor:
                cursor.execute(
                    """
                    INSERT INTO callgate_receipts (
                        operation_id, state, request_id, tool, contract_version, args_hash,
                        arguments, actor, lease_owner, lease_expires_at, attempts,
                        created_at, updated_at
                    ) VALUES (
                        %(operation_id)s, 'claimed', %(request_id)s, %(tool)s,
                        %(contract_version)s, %(args_hash)s, %(arguments)s::jsonb,
                        %(actor)s::jsonb, %(worker)s, %(lease_expires_at)s, 1, %(now)s, %(now)s
                    )
                    ON CONFLICT (operation_id) DO NOTHING
                    RETURNING *
                    """,
                    {
                        **_operation_parameters(op),
                        "worker": worker,
                        "lease_expires_at": now + lease,
                        "now": now,
                    },
                )
                created = cursor.fetchone()
                if created is not None:
                    return Claim(ClaimOutcome.CLAIMED, _receipt(created))
                cursor.execute(
                    "SELECT * FROM callgate_receipts WHERE operation_id = %s FOR UPDATE",
                    (op.operation_id,),
                )
                row = cursor.fetchone()
                if row is None:
                    continue
                existing = _receipt(row)
                if existing.args_hash != op.args_hash:
                    raise OperationIdReused(operation_id_reused_message(existing, op))
                outcome = claim_outcome(existing, now=now)
                if outcome in (ClaimOutcome.BUSY, ClaimOutcome.EXISTING):
                    return Claim(outcome, existing)
                cursor.execute(
                    """
                    UPDATE callgate_receipts
                    SET state = 'claimed', lease_owner = %s, lease_expires_at = %s,
                        attempts = attempts + 1, updated_at = %s
                    WHERE operation_id = %s
                    RETURNING *
                    """,
                    (worker, now + lease, now, op.operation_id),
                )
                return Claim(outcome, _receipt(_required(cursor.fetchone())))
        raise StoreError(f"receipt {op.operation_id!r} kept vanishing while being claimed")

    def renew(self, operation_id: str, *, worker: str, lease: timedelta, now: datetime) -> Receipt:
        now = as_utc(now)
        with self._transaction() as cursor:
            cursor.execute(
                """
                UPDATE callgate_receipts
                SET lease_expires_at = %s, updated_at = %s
                WHERE operation_id = %s AND state = 'claimed' AND lease_owner = %s
                RETURNING *
                """,
                (now + lease, now, operation_id, worker),
            )
            row = cursor.fetchone()
        if row is None:
            raise LeaseLost(lease_lost_message(operation_id, worker))
        return _receipt(row)

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
        with self._transaction() as cursor:
            cursor.execute(
                """
                UPDATE callgate_receipts
                SET state = %s, result = %s::jsonb, error_class = %s, detail = %s,
                    lease_owner = NULL, lease_expires_at = NULL, updated_at = %s
                WHERE operation_id = %s AND state = 'claimed' AND lease_owner = %s
                RETURNING *
                """,
                (
                    state.value, _json_or_null(result), error_class, detail, now,
                    operation_id, worker,
                ),
            )
            row = cursor.fetchone()
        if row is None:
            raise LeaseLost(lease_lost_message(operation_id, worker))
        return _receipt(row)

    def hold_for_confirmation(
        self, op: NewOperation, *, expires_at: datetime, now: datetime
    ) -> Receipt:
        now = as_utc(now)
        for _ in range(3):
            with self._transaction() as cursor:
                cursor.execute(
                    """
                    INSERT INTO callgate_receipts (
                        operation_id, state, request_id, tool, contract_version, args_hash,
                        arguments, actor, confirmation_expires_at, created_at, updated_at
                    ) VALUES (
                        %(operation_id)s, 'awaiting_confirmation', %(request_id)s, %(tool)s,
                        %(contract_version)s, %(args_hash)s, %(arguments)s::jsonb,
                        %(actor)s::jsonb, %(expires_at)s, %(now)s, %(now)s
                    )
                    ON CONFLICT (operation_id) DO NOTHING
                    RETURNING *
                    """,
                    {**_operation_parameters(op), "expires_at": as_utc(expires_at), "now": now},
                )
                row = cursor.fetchone()
                if row is not None:
                    return _receipt(row)
                cursor.execute(
                    "SELECT * FROM callgate_receipts WHERE operation_id = %s", (op.operation_id,)
                )
                row = cursor.fetchone()
                if row is None:
                    continue
                existing = _receipt(row)
                if existing.args_hash != op.args_hash:
                    raise OperationIdReused(operation_id_reused_message(existing, op))
                return existing
        raise StoreError(f"receipt {op.operation_id!r} kept vanishing while being held")

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
        with self._transaction() as cursor:
            # The state condition is re-checked after any concurrent confirmation commits, so
            # of two replays of one confirmation only the first matches.
            cursor.execute(
                """
                UPDATE callgate_receipts
                SET state = 'claimed', confirmed_by = %s, confirmed_at = %s, lease_owner = %s,
                    lease_expires_at = %s, attempts = attempts + 1, updated_at = %s
                WHERE operation_id = %s AND state = 'awaiting_confirmation'
                RETURNING *
                """,
                (confirmed_by, now, worker, now + lease, now, operation_id),
            )
            claimed = cursor.fetchone()
            if claimed is not None:
                return Claim(ClaimOutcome.CLAIMED, _receipt(claimed))
            cursor.execute(
                "SELECT * FROM callgate_receipts WHERE operation_id = %s", (operation_id,)
            )
            row = cursor.fetchone()
        if row is None:
            raise StoreError(f"no receipt for operation {operation_id!r} to confirm")
        existing = _receipt(row)
        return Claim(replayed_confirmation_outcome(existing, now=now), existing)

    def get(self, operation_id: str) -> Receipt | None:
        with self._transaction() as cursor:
            cursor.execute(
                "SELECT * FROM callgate_receipts WHERE operation_id = %s", (operation_id,)
            )
            row = cursor.fetchone()
        return None if row is None else _receipt(row)

    # Review queue --------------------------------------------------------------------------

    def open_review(self, item: NewReviewItem, *, now: datetime) -> ReviewItem:
        now = as_utc(now)
        with self._transaction() as cursor:
            cursor.execute(
                """
                INSERT INTO callgate_reviews (
                    review_id, tool, reason, summary, operation_id, payload, status, created_at
                ) VALUES (%s, %s, %s, %s, %s, %s::jsonb, 'open', %s)
                RETURNING *
                """,
                (
                    str(uuid.uuid4()), item.tool, item.reason, item.summary, item.operation_id,
                    canonical_json(item.payload), now,
                ),
            )
            review = _review(_required(cursor.fetchone()))
            if item.operation_id is not None:
                cursor.execute(
                    """
                    UPDATE callgate_receipts
                    SET state = 'in_review', lease_owner = NULL, lease_expires_at = NULL,
                        updated_at = %s
                    WHERE operation_id = %s
                    """,
                    (now, item.operation_id),
                )
        return review

    def list_reviews(self, *, status: ReviewStatus | None = None) -> list[ReviewItem]:
        with self._transaction() as cursor:
            cursor.execute(
                """
                SELECT * FROM callgate_reviews
                WHERE %(status)s::text IS NULL OR status = %(status)s::text
                ORDER BY created_at, queue_position
                """,
                {"status": None if status is None else status.value},
            )
            rows = cursor.fetchall()
        return [_review(row) for row in rows]

    def take_review(self, *, reviewer: str, now: datetime) -> ReviewItem | None:
        now = as_utc(now)
        with self._transaction() as cursor:
            cursor.execute(
                """
                UPDATE callgate_reviews
                SET status = 'taken', taken_by = %s, taken_at = %s
                WHERE review_id = (
                    SELECT review_id FROM callgate_reviews
                    WHERE status = 'open'
                    ORDER BY created_at, queue_position
                    LIMIT 1
                    FOR UPDATE SKIP LOCKED
                )
                RETURNING *
                """,
                (reviewer, now),
            )
            row = cursor.fetchone()
        return None if row is None else _review(row)

    def resolve_review(
        self, review_id: str, *, resolution: str, note: str, by: str, now: datetime
    ) -> ReviewItem:
        check_resolution(resolution)
        now = as_utc(now)
        with self._transaction() as cursor:
            cursor.execute(
                "SELECT * FROM callgate_reviews WHERE review_id = %s FOR UPDATE", (review_id,)
            )
            row = cursor.fetchone()
            if row is None:
                raise StoreError(f"no review item {review_id!r}")
            if row["status"] == ReviewStatus.RESOLVED.value:
                raise StoreError(f"review item {review_id!r} is already resolved")
            cursor.execute(
                """
                UPDATE callgate_reviews
                SET status = 'resolved', resolution = %s, note = %s, resolved_by = %s,
                    resolved_at = %s
                WHERE review_id = %s
                RETURNING *
                """,
                (resolution, note, by, now, review_id),
            )
            resolved = _review(_required(cursor.fetchone()))
            if resolved.operation_id is not None:
                cursor.execute(
                    """
                    UPDATE callgate_receipts
                    SET state = %s, error_class = %s, detail = %s, lease_owner = NULL,
                        lease_expires_at = NULL, updated_at = %s
                    WHERE operation_id = %s
                    """,
                    (
                        resolution, resolved_error_class(resolution, resolved.reason), note, now,
                        resolved.operation_id,
                    ),
                )
        return resolved

    # Housekeeping --------------------------------------------------------------------------

    def purge(self, *, older_than: datetime) -> int:
        cutoff = as_utc(older_than)
        with self._transaction() as cursor:
            cursor.execute(
                """
                DELETE FROM callgate_receipts
                WHERE state IN ('succeeded', 'failed') AND updated_at < %s
                """,
                (cutoff,),
            )
            receipts = cursor.rowcount
            cursor.execute(
                "DELETE FROM callgate_reviews WHERE status = 'resolved' AND resolved_at < %s",
                (cutoff,),
            )
            return receipts + cursor.rowcount

    def close(self) -> None:
        self._pool.close()

    # Connections, transactions, migrations -------------------------------------------------

    def _configure(self, connection: Connection[Any]) -> None:
        from psycopg import sql

        connection.execute("SET TIME ZONE 'UTC'")
        if self.schema is not None:
            connection.execute(
                sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema))
            )

    @contextmanager
    def _transaction(self) -> Iterator[Cursor[Any]]:
        with (
            self._errors_as_store_errors(),
            self._pool.connection() as connection,
            connection.transaction(),
            connection.cursor() as cursor,
        ):
            yield cursor

    @contextmanager
    def _errors_as_store_errors(self) -> Iterator[None]:
        try:
            yield
        except self._driver_error as exc:
            raise StoreError(f"receipt store {self.url}: {_one_line(exc)}") from exc

    def _migrate(self, connection: Connection[Any]) -> list[int]:
        from psycopg import sql

        applied = []
        with connection.transaction():
            connection.execute(
                "SELECT pg_advisory_xact_lock(%s, hashtext(coalesce(%s, current_schema())))",
                (MIGRATION_LOCK_KEY, self.schema),
            )
            if self.schema is not None:
                # Looked up first: CREATE SCHEMA IF NOT EXISTS needs CREATE on the database
                # even when the schema is there, which a least-privilege role lacks.
                existing = connection.execute(
                    """
                    SELECT has_schema_privilege(nspname, 'USAGE') AS usable
                    FROM pg_namespace WHERE nspname = %s
                    """,
                    (self.schema,),
                ).fetchone()
                if existing is None:
                    connection.execute(
                        sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(self.schema))
                    )
                elif not existing["usable"]:
                    # Without USAGE the schema silently drops out of the search path and
                    # PostgreSQL would only say "no schema has been selected to create in".
                    raise StoreConfigError(
                        f"cannot open receipt store {self.url}: permission denied for schema "
                        f"{self.schema} (the role needs USAGE on it)"
                    )
            # Looked up first for the same reason: CREATE TABLE IF NOT EXISTS needs CREATE.
            version_table = connection.execute(
                "SELECT to_regclass('callgate_schema_version') AS oid"
            ).fetchone()
            if version_table is None or version_table["oid"] is None:
                connection.execute(
                    """
                    CREATE TABLE callgate_schema_version (
                        version    integer PRIMARY KEY,
                        applied_at timestamptz NOT NULL DEFAULT now()
                    )
                    """
                )
            current_row = connection.execute(
                "SELECT coalesce(max(version), 0) AS version FROM callgate_schema_version"
            ).fetchone()
            current = 0 if current_row is None else int(current_row["version"])
            if current > SCHEMA_VERSION:
                raise StoreConfigError(
                    f"cannot open receipt store {self.url}: its schema version {current} is "
                    f"newer than this callgate supports ({SCHEMA_VERSION}); upgrade callgate"
                )
            for version, statements in MIGRATIONS:
                if version <= current:
                    continue
                for statement in statements:
                    connection.execute(statement)
                connection.execute(
                    "INSERT INTO callgate_schema_version (version) VALUES (%s)", (version,)
                )
                applied.append(version)
        return applied

    def _check_privileges(self, connection: Connection[Any]) -> None:
        # Tables may exist already (created by an owner role), so migrating proves nothing
        # about what this role may do with them.
        missing = connection.execute(
            """
            SELECT table_name, privilege
            FROM unnest(%s::text[]) AS table_name, unnest(%s::text[]) AS privilege
            WHERE NOT has_table_privilege(table_name, privilege)
            ORDER BY table_name, privilege
            """,
            (list(DATA_TABLES), list(REQUIRED_PRIVILEGES)),
        ).fetchall()
        if missing:
            lacking: dict[str, list[str]] = {}
            for row in missing:
                lacking.setdefault(row["table_name"], []).append(row["privilege"])
            described = "; ".join(
                f"{', '.join(privileges)} on {table}" for table, privileges in lacking.items()
            )
            raise StoreConfigError(
                f"cannot open receipt store {self.url}: the role lacks {described}"
            )


def _operation_parameters(op: NewOperation) -> dict[str, Any]:
    return {
        "operation_id": op.operation_id,
        "request_id": op.request_id,
        "tool": op.tool,
        "contract_version": op.contract_version,
        "args_hash": op.args_hash,
        "arguments": canonical_json(op.arguments),
        "actor": canonical_json(op.actor),
    }


def _json_or_null(value: Any) -> str | None:
    return None if value is None else canonical_json(value)


def _required(row: dict[str, Any] | None) -> dict[str, Any]:
    if row is None:
        raise StoreError("a row written in this transaction was not returned")
    return row


def _time(value: datetime | None) -> datetime | None:
    return None if value is None else value.astimezone(UTC)


def _receipt(row: dict[str, Any]) -> Receipt:
    return Receipt(
        operation_id=row["operation_id"],
        state=ReceiptState(row["state"]),
        request_id=row["request_id"],
        tool=row["tool"],
        contract_version=row["contract_version"],
        args_hash=row["args_hash"],
        arguments=row["arguments"],
        actor=row["actor"],
        created_at=row["created_at"].astimezone(UTC),
        updated_at=row["updated_at"].astimezone(UTC),
        result=row["result"],
        error_class=row["error_class"],
        detail=row["detail"],
        confirmed_by=row["confirmed_by"],
        confirmed_at=_time(row["confirmed_at"]),
        confirmation_expires_at=_time(row["confirmation_expires_at"]),
        lease_owner=row["lease_owner"],
        lease_expires_at=_time(row["lease_expires_at"]),
        attempts=row["attempts"],
    )


def _review(row: dict[str, Any]) -> ReviewItem:
    return ReviewItem(
        review_id=row["review_id"],
        tool=row["tool"],
        reason=row["reason"],
        summary=row["summary"],
        operation_id=row["operation_id"],
        payload=row["payload"],
        status=ReviewStatus(row["status"]),
        created_at=row["created_at"].astimezone(UTC),
        taken_by=row["taken_by"],
        taken_at=_time(row["taken_at"]),
        resolution=row["resolution"],
        note=row["note"],
        resolved_by=row["resolved_by"],
        resolved_at=_time(row["resolved_at"]),
    )


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def _open_failure(url: str, exc: BaseException) -> str:
    """One line saying why the store at ``url`` cannot be opened, without libpq's framing."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    reason = lines[0] if lines else type(exc).__name__
    # libpq says 'connection failed: connection to server at "h", port 5432 failed: FATAL: x'.
    reason = re.sub(r'^connection failed: connection to server at "[^"]*", port \d+ failed: ',
                    "", reason)
    reason = re.sub(r"^(FATAL|ERROR):\s+", "", reason)
    if "connection refused" in reason.lower():
        reason = "connection refused — is the server running?"
    elif "timeout expired" in reason.lower():
        reason = "no answer before the connect timeout — is the host reachable?"
    return f"cannot open receipt store {url}: {reason}"
