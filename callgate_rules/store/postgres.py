"""The receipt store in PostgreSQL, shared by any number of hosts.

The receipt protocol is ``store.sql``'s; this module holds PostgreSQL's dialect, connections,
migrations and privilege checks. Atomicity comes from the database: the primary key plus
``INSERT ... ON CONFLICT DO NOTHING`` decides who creates a receipt, ``SELECT ... FOR UPDATE``
holds a row while the state machine decides, conditional ``UPDATE ... RETURNING`` fences
workers that lost their lease, and ``FOR UPDATE SKIP LOCKED`` hands each review item to one
reviewer.

psycopg is optional: it is imported when a store is opened, never when callgate is.
"""

from __future__ import annotations

import functools
import json
import math
import re
import select
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from decimal import Decimal
from types import TracebackType
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import msgspec

from callgate_rules.errors import StoreConfigError
from callgate_rules.store.base import WrittenJson, as_utc, read_stored_json
from callgate_rules.store.history import (
    POSTGRES_CHANGES,
    POSTGRES_LEASES,
    POSTGRES_TABLE,
    HistoryStatements,
)
from callgate_rules.store.intents import POSTGRES_INTENTS, IntentStatements
from callgate_rules.store.sessions import POSTGRES_SESSIONS, SessionStatements
from callgate_rules.store.sql import SqlReceiptStore, pending_migrations
from callgate_rules.store.statements import Cursor, Dialect, Row, Statements, execute, render

if TYPE_CHECKING:
    from psycopg import Connection
    from psycopg import Cursor as PsycopgCursor
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
    (2, POSTGRES_TABLE),  # run histories (store.history)
    (3, POSTGRES_LEASES),  # run leases: one run's history-reading decisions, one at a time
    (4, POSTGRES_SESSIONS),  # the review page's sessions (store.sessions)
    # the hash of the decision log line of the decision that executed a write: nullable and
    # without a default, so adding it rewrites no row and existing receipts read None
    (5, ["ALTER TABLE callgate_receipts ADD COLUMN log_line text"]),
    (6, POSTGRES_INTENTS),  # run intents (store.intents)
    (7, POSTGRES_CHANGES),  # each history row's mark of its last change (store.history)
]
SCHEMA_VERSION = MIGRATIONS[-1][0]

POSTGRES = Dialect(
    placeholder="%s",
    # psycopg sends text of no declared type: JSON must be cast, and a parameter the server
    # cannot infer a type for (``... IS NULL``) must be named text.
    casts={"json": "::jsonb", "text": "::text"},
    row_lock=" FOR UPDATE",
    returning=" RETURNING *",
)

SCOPED_TAKE_OLDEST_OPEN_REVIEW = """
    UPDATE callgate_reviews
    SET status = 'taken', taken_by = {{reviewer}}, taken_at = {{now}}
    WHERE review_id = (
        SELECT review_id FROM callgate_reviews
        WHERE status = 'open' AND ({condition})
        ORDER BY created_at, queue_position
        LIMIT 1
        FOR UPDATE SKIP LOCKED
    )
    RETURNING *
"""
TAKE_OLDEST_OPEN_REVIEW = render(
    """
    UPDATE callgate_reviews
    SET status = 'taken', taken_by = {reviewer}, taken_at = {now}
    WHERE review_id = (
        SELECT review_id FROM callgate_reviews
        WHERE status = 'open'
        ORDER BY created_at, queue_position
        LIMIT 1
        FOR UPDATE SKIP LOCKED
    )
    RETURNING *
    """,
    POSTGRES,
)


# First key of the advisory lock that serializes migrations (the second is the schema's hash).
MIGRATION_LOCK_KEY = 0x6361_6C6C  # "call"

DATA_TABLES = ("callgate_receipts", "callgate_reviews", "callgate_run_history",
               "callgate_run_leases", "callgate_run_intents")
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


def _as_jsonb_keeps(literal: str) -> float | int:
    """A float literal as a jsonb column gives it back: numeric keeps a number written with
    an exponent in plain notation (``1e+23`` as ``100000000000000000000000``, an integer
    once read) and has no sign for zero (``-0.0`` as ``0.0``); any other literal reads as
    written (``-0.5`` too, which only looks like a zero, read the long way to itself)."""
    if "e" in literal or "E" in literal or literal.startswith("-0"):
        return _jsonb_number(literal)
    return float(literal)


def read_as_jsonb(text: str | bytes) -> Any:
    """A JSON text as a jsonb column gives its values back once stored (``_as_jsonb_keeps``
    for each float; keys may come back in another order: jsonb orders them by length, and
    a dict's order decides no comparison): msgspec reads what it accepts, the standard
    library what it refuses. Only a float can be respelled (neither msgspec nor ``json``
    writes an integer with an exponent or a sign on zero), and msgspec asks about floats
    alone, so a text without one, nearly every text, is read as fast as any."""
    try:
        return _read_as_jsonb_fast(text)
    except (msgspec.DecodeError, RecursionError, UnicodeError):  # not msgspec's to read
        return json.loads(text, parse_float=_jsonb_number)


_read_as_jsonb_fast = msgspec.json.Decoder(float_hook=_as_jsonb_keeps).decode
JSONB = WrittenJson(_read_as_jsonb_fast, read_as_jsonb)


def _jsonb_number(literal: str) -> int | float:
    plain = format(Decimal(literal), "f")  # numeric's text: every digit, no exponent
    # + 0.0 turns a negative zero into zero and leaves every other float as it is
    return float(plain) + 0.0 if "." in plain else int(plain)


class PostgresStore(SqlReceiptStore):
    """A ``ReceiptStore`` in the PostgreSQL database at ``url``.

    ``schema`` names a PostgreSQL schema to keep the tables in (created if missing), so
    several deployments or test runs can share one database. Opening runs pending
    migrations and checks privileges, so a bad URL, a server that is down, a missing
    database or missing privileges fail here with a one-line ``StoreConfigError``.
    """

    _sql = Statements(POSTGRES)
    _history_sql = HistoryStatements.of(POSTGRES)
    _intent_sql = IntentStatements.of(POSTGRES)
    _dialect = POSTGRES
    _sessions_sql = SessionStatements.of(POSTGRES)
    _payload_actor = "(callgate_reviews.payload -> 'actor')"

    def __init__(
        self,
        url: str,
        *,
        schema: str | None = None,
        min_connections: int = 1,
        max_connections: int = 10,
        connect_timeout: float = 5.0,
    ) -> None:
        super().__init__()
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
        self._driver_error = psycopg.Error
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
            connection_class=_store_connection_class(),
            kwargs=connection_options,
            min_size=min_connections,
            max_size=max_connections,
            configure=self._configure,
            # A connection the server dropped while idle is replaced instead of failing a call.
            check=_check_if_spoken,
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

    def close(self) -> None:
        self._pool.close()

    # The dialect ---------------------------------------------------------------------------

    def _take_oldest_open_review(self, cursor: Cursor, parameters: Mapping[str, Any],
                                 condition: str = "1 = 1") -> Row | None:
        # One statement: SKIP LOCKED passes over an item another reviewer is taking.
        take = (TAKE_OLDEST_OPEN_REVIEW if condition == "1 = 1" else
            render(SCOPED_TAKE_OLDEST_OPEN_REVIEW.format(condition=condition), POSTGRES))
        execute(cursor, take, parameters)
        row: Row | None = cursor.fetchone()
        return row

    @staticmethod
    def _field_text(column: str, name_parameter: str, /) -> str:
        name = f"{{{name_parameter}:text}}"
        return (f"(CASE WHEN jsonb_typeof({column} -> {name}) = 'string' "
                f"THEN {column} ->> {name} END)")

    _time_parameter = staticmethod(as_utc)  # psycopg sends aware datetimes as timestamptz

    @staticmethod
    def _time_value(stored: datetime) -> datetime:
        return stored.astimezone(UTC)

    @staticmethod
    def _json_value(stored: Any) -> Any:
        return stored  # psycopg has decoded jsonb already

    _written_json = JSONB  # jsonb respells some numbers

    def _describe_error(self, error: Exception) -> str:
        return _one_line(error)

    # Connections, transactions, migrations -------------------------------------------------

    def _configure(self, connection: Connection[Any]) -> None:
        from psycopg import sql
        from psycopg.types.json import set_json_loads

        set_json_loads(read_stored_json, connection)  # json and jsonb columns read as SQLite's are
        connection.execute("SET TIME ZONE 'UTC'")
        if self.schema is not None:
            connection.execute(
                sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema))
            )

    @contextmanager
    def _write(self) -> Iterator[PsycopgCursor[Any]]:
        with (
            self._errors_as_store_errors(),
            self._pool.connection() as connection,
            connection.transaction(),
            connection.cursor() as cursor,
        ):
            yield cursor

    _read = _write  # a read in a transaction of its own sees one snapshot

    def _statement(self) -> Lent:
        # The pool's connections are in autocommit: no BEGIN, no COMMIT round trip.
        return Lent(self)

    def _connection_lost(self, error: BaseException | None) -> bool:
        # Class 08 is a connection exception; 57P01-57P03 and 57P05 the server ending the
        # session (shut down, crash recovery, idle timeout); psycopg's own "the connection
        # is lost" errors carry no SQLSTATE. The pool's own errors (no connection to lend
        # in time, closed) sent nothing, and waiting for one twice would double the wait.
        from psycopg import OperationalError
        from psycopg_pool import PoolClosed, PoolTimeout, TooManyRequests

        if isinstance(error, PoolTimeout | PoolClosed | TooManyRequests):
            return False
        code = getattr(error, "sqlstate", None)
        return isinstance(error, OperationalError) and (
            code is None or code.startswith("08") or code in _SESSION_ENDED)

    @contextmanager
    def _lease_statement(self) -> Iterator[PsycopgCursor[Any]]:
        # A run lease is atomic, not durable (``SqlReceiptStore._lease_statement``): an
        # asynchronous commit is seen by every session at once, without waiting for the WAL
        # flush.
        with (
            self._errors_as_store_errors(),
            self._pool.connection() as connection,
            connection.transaction(),
            connection.cursor() as cursor,
        ):
            cursor.execute("SET LOCAL synchronous_commit TO OFF")
            yield cursor

    def _migrate(self, connection: Connection[Any]) -> list[int]:
        applied = []
        with connection.transaction():
            connection.execute(
                "SELECT pg_advisory_xact_lock(%s, hashtext(coalesce(%s, current_schema())))",
                (MIGRATION_LOCK_KEY, self.schema),
            )
            if self.schema is not None:
                self._ensure_schema(connection, self.schema)
            # Looked up first: CREATE TABLE IF NOT EXISTS needs CREATE on the schema even when
            # the table is there, which a least-privilege role lacks.
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
            for version, statements in pending_migrations(self.url, MIGRATIONS, current):
                for statement in statements:
                    connection.execute(statement)
                connection.execute(
                    "INSERT INTO callgate_schema_version (version) VALUES (%s)", (version,)
                )
                applied.append(version)
        return applied

    def _ensure_schema(self, connection: Connection[Any], schema: str) -> None:
        from psycopg import sql

        # Looked up first: CREATE SCHEMA IF NOT EXISTS needs CREATE on the database even
        # when the schema is there, which a least-privilege role lacks.
        existing = connection.execute(
            """
            SELECT has_schema_privilege(nspname, 'USAGE') AS usable
            FROM pg_namespace WHERE nspname = %s
            """,
            (schema,),
        ).fetchone()
        if existing is None:
            connection.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        elif not existing["usable"]:
            # Without USAGE the schema silently drops out of the search path and PostgreSQL
            # would only say "no schema has been selected to create in".
            raise StoreConfigError(
                f"cannot open receipt store {self.url}: permission denied for schema "
                f"{schema} (the role needs USAGE on it)"
            )

    def _check_privileges(self, connection: Connection[Any]) -> None:
        # Tables may exist already (created by an owner role), so migrating proves nothing
        # about what this role may do with them. Only the tables the schema's migrations
        # made are asked about (a schema held at an older version has fewer).
        missing = connection.execute(
            """
            SELECT table_name, privilege
            FROM unnest(%s::text[]) AS table_name, unnest(%s::text[]) AS privilege
            WHERE to_regclass(table_name) IS NOT NULL
              AND NOT has_table_privilege(table_name, privilege)
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


_SESSION_ENDED = frozenset({"57P01", "57P02", "57P03", "57P05"})


class Lent:
    """``with Lent(store) as cursor``: the statement cursor of a connection lent by the
    store's pool for one statement, given back after it; the driver's errors raised as
    ``StoreError``.

    The pool's ``getconn`` and ``putconn`` without its ``connection()`` context: a write
    lends two connections, and two generator contexts (the pool's and a ``with
    connection``, whose commit an autocommitted connection does not need) cost more than
    the statement's own Python. The cursor is the connection's own, made once
    (``_store_connection_class``).
    """

    __slots__ = ("store", "connection")

    def __init__(self, store: PostgresStore) -> None:
        self.store = store

    def __enter__(self) -> PsycopgCursor[Any]:
        pool = self.store._pool
        try:
            self.connection = connection = pool.getconn()
        except self.store._driver_error as error:
            raise self.store._store_error(error) from error
        cursor: PsycopgCursor[Any] | None = connection.statement_cursor
        if cursor is None or cursor.closed:
            try:
                cursor = connection.statement_cursor = connection.cursor()
            except BaseException as error:  # the connection broke: it goes back to be replaced
                pool.putconn(connection)
                if isinstance(error, self.store._driver_error):
                    raise self.store._store_error(error) from error
                raise
        return cursor

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.store._pool.putconn(self.connection)  # a broken connection is replaced
        if isinstance(error, self.store._driver_error):
            raise self.store._store_error(error) from error


@functools.cache
def _store_connection_class() -> type[Connection[Any]]:
    """The class of the pool's connections: psycopg's, keeping one cursor for the store's
    single statements (``Lent``). A cursor made per statement learns again how to send
    each parameter and read each column (its adaptation context starts empty): about
    20 µs of the client's CPU a statement, two statements a write. A connection is lent to
    one borrower at a time, so its cursor is too; a cursor whose statement failed is used
    again as it is (psycopg resets it at the next ``execute``), and a broken connection
    goes with its cursor. Made on first use: psycopg is imported when a store is opened."""
    import psycopg

    class StoreConnection(psycopg.Connection[Any]):
        statement_cursor: psycopg.Cursor[Any] | None = None

    return StoreConnection


def _check_if_spoken(connection: Connection[Any]) -> None:
    """The pool's check of a connection it is about to lend: asked with a round trip only
    when the server has written to it.

    An idle connection the server still holds has nothing to read; one the server closed
    (shut down, restarted, terminated, timed out) has its last words or the end of the
    stream waiting, so its socket is readable at once. A healthy connection thus costs one
    ``poll`` instead of a round trip; a statement that meets a connection lost after the
    check anyway is sent once more, where that is safe (``SqlReceiptStore._sent``).
    """
    if _readable(connection.fileno()):
        from psycopg_pool import ConnectionPool

        ConnectionPool.check_connection(connection)


def _readable(descriptor: int) -> bool:
    """Whether the socket has something to read now. ``poll``, not ``select``: ``select``
    refuses a descriptor above 1023, which a busy process has (Windows has no ``poll``,
    and its ``select`` no such limit).

    One poller per descriptor, made once (making and registering one was a third of what
    this cost): a poller keeps only the number, so one made for a connection
    closed since serves the next socket given that number; and a descriptor names one open
    socket, whose connection the pool lends to one borrower at a time, so no poller is
    polled by two threads at once (which ``poll`` refuses)."""
    if _POLL is None:
        return bool(select.select([descriptor], [], [], 0)[0])
    poller = _POLLERS.get(descriptor)
    if poller is None:
        poller = _POLLERS[descriptor] = _POLL()
        poller.register(descriptor, select.POLLIN)
    return bool(poller.poll(0))


_POLL = getattr(select, "poll", None)
_POLLERS: dict[int, Any] = {}  # by descriptor (``_readable``)


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
