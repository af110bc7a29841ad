"""The SQL of the receipt protocol, written once, and how it is spelled in each dialect.

Templates name their parameters in braces (``{now}``, ``{arguments:json}``, ``{status:text}``);
``render`` turns one into a ``Query`` for a ``Dialect`` (its placeholder, the casts its typed
parameters need) once, when a store class is defined. ``Statements`` holds every statement
``store.sql.SqlReceiptStore`` runs, rendered for one dialect. The ``WHERE`` clauses here are
the guarantees: ``HELD_BY_WORKER`` fences a worker whose lease was taken over, and
``CLAIM_CONFIRMED`` only matches a receipt still awaiting its confirmation.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from operator import itemgetter
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol


class Row(Protocol):
    """A result row read by column name: ``sqlite3.Row`` and psycopg's ``dict_row`` both are."""

    def __getitem__(self, column: str, /) -> Any: ...


class Cursor(Protocol):
    """The part of a DB-API cursor the protocol uses; ``sqlite3`` and psycopg cursors fit."""

    @property
    def rowcount(self) -> int: ...

    def execute(self, query: str, parameters: Sequence[Any], /) -> object: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class StorePart:
    """A part of ``store.sql.SqlReceiptStore`` kept in a module of its own (its run
    history, its run intents): what it uses of the store, which the store and its dialects
    supply."""

    if TYPE_CHECKING:
        def _statement(self) -> AbstractContextManager[Cursor]: ...

        def _read(self) -> AbstractContextManager[Cursor]: ...

        @staticmethod
        def _time_parameter(moment: datetime, /) -> Any: ...

        @staticmethod
        def _time_value(stored: Any, /) -> datetime: ...

        @staticmethod
        def _json_value(stored: Any, /) -> Any: ...


@dataclass(frozen=True)
class Dialect:
    """What the statements below need to know about one SQL dialect."""

    placeholder: str  # a positional parameter: "?", "%s"
    casts: Mapping[str, str]  # what follows a typed parameter: "json" -> "::jsonb"
    row_lock: str  # follows a SELECT whose row decides a write: " FOR UPDATE"
    returning: str  # follows a write to get its row back: " RETURNING *", or "" to read it


class Query(NamedTuple):
    """A statement in one dialect, and how to pick its parameters from the named ones.

    Templates name their parameters, but both drivers bind positional ones faster (psycopg
    by a microsecond a statement), so ``render`` records the names in placeholder order.
    """

    sql: str
    arguments: Callable[[Mapping[str, Any]], tuple[Any, ...]]
    returns_rows: bool = False  # a SELECT, or a write with RETURNING


_PARAMETER = re.compile(r"\{(\w+)(?::(\w+))?\}")
# The protocol's statements that return rows: a SELECT, or a write with RETURNING (none of
# them starts with WITH).
_RETURNS_ROWS = re.compile(r"^\s*SELECT\b|\bRETURNING\b", re.IGNORECASE)


def render(template: str, dialect: Dialect) -> Query:
    """``template`` with each ``{name}`` or ``{name:type}`` spelled as ``dialect`` wants."""
    names: list[str] = []

    def parameter(match: re.Match[str]) -> str:
        name, kind = match[1], match[2]
        names.append(name)
        return dialect.placeholder + ("" if kind is None else dialect.casts[kind])

    sql = _PARAMETER.sub(parameter, template)
    return Query(sql, _picker(names), _RETURNS_ROWS.search(sql) is not None)


def execute(cursor: Cursor, query: Query, parameters: Mapping[str, Any]) -> None:
    """Run ``query`` with its parameters taken by name from ``parameters``."""
    cursor.execute(query.sql, query.arguments(parameters))


def _picker(names: list[str]) -> Callable[[Mapping[str, Any]], tuple[Any, ...]]:
    if len(names) > 1:
        pick: Callable[[Mapping[str, Any]], tuple[Any, ...]] = itemgetter(*names)
        return pick
    if names:
        name = names[0]
        return lambda parameters: (parameters[name],)
    return lambda parameters: ()


# The statements -----------------------------------------------------------------------------

SELECT_RECEIPT = "SELECT * FROM callgate_receipts WHERE operation_id = {operation_id}"
SELECT_REVIEW = "SELECT * FROM callgate_reviews WHERE review_id = {review_id}"

# The fence of every write a lease holder makes: see ``base.holds_lease``.
HELD_BY_WORKER = "operation_id = {operation_id} AND state = 'claimed' AND lease_owner = {worker}"

INSERT_CLAIMED = """
    INSERT INTO callgate_receipts (
        operation_id, state, request_id, tool, contract_version, args_hash,
        arguments, actor, lease_owner, lease_expires_at, attempts, created_at, updated_at
    ) VALUES (
        {operation_id}, 'claimed', {request_id}, {tool}, {contract_version}, {args_hash},
        {arguments:json}, {actor:json}, {worker}, {lease_expires_at}, 1, {now}, {now}
    )
    ON CONFLICT (operation_id) DO NOTHING
"""
TAKE_OVER = """
    UPDATE callgate_receipts
    SET state = 'claimed', lease_owner = {worker}, lease_expires_at = {lease_expires_at},
        attempts = attempts + 1, updated_at = {now}
    WHERE operation_id = {operation_id}
"""
RENEW = f"""
    UPDATE callgate_receipts
    SET lease_expires_at = {{lease_expires_at}}, updated_at = {{now}}
    WHERE {HELD_BY_WORKER}
"""
FINISH = f"""
    UPDATE callgate_receipts
    SET state = {{state}}, result = {{result:json}}, error_class = {{error_class}},
        detail = {{detail}}, lease_owner = NULL, lease_expires_at = NULL, updated_at = {{now}}
    WHERE {HELD_BY_WORKER}
"""
INSERT_HELD = """
    INSERT INTO callgate_receipts (
        operation_id, state, request_id, tool, contract_version, args_hash,
        arguments, actor, confirmation_expires_at, detail, created_at, updated_at
    ) VALUES (
        {operation_id}, 'awaiting_confirmation', {request_id}, {tool}, {contract_version},
        {args_hash}, {arguments:json}, {actor:json}, {expires_at}, {detail}, {now}, {now}
    )
    ON CONFLICT (operation_id) DO NOTHING
"""
CLAIM_CONFIRMED = """
    UPDATE callgate_receipts
    SET state = 'claimed', confirmed_by = {confirmed_by}, confirmed_at = {now},
        lease_owner = {worker}, lease_expires_at = {lease_expires_at},
        attempts = attempts + 1, updated_at = {now}
    WHERE operation_id = {operation_id} AND state = 'awaiting_confirmation'
"""
INSERT_REVIEW = """
    INSERT INTO callgate_reviews (
        review_id, tool, reason, summary, operation_id, payload, status, created_at
    ) VALUES (
        {review_id}, {tool}, {reason}, {summary}, {operation_id}, {payload:json}, 'open', {now}
    )
"""
MOVE_TO_REVIEW = """
    UPDATE callgate_receipts
    SET state = 'in_review', lease_owner = NULL, lease_expires_at = NULL, updated_at = {now}
    WHERE operation_id = {operation_id}
"""
LIST_RECEIPTS = """
    SELECT * FROM callgate_receipts WHERE state = {state}
    ORDER BY created_at, operation_id LIMIT {limit}
"""
LIST_REVIEWS = """
    SELECT * FROM callgate_reviews
    WHERE {status:text} IS NULL OR status = {status:text}
    ORDER BY created_at, queue_position
"""
RESOLVE_REVIEW = """
    UPDATE callgate_reviews
    SET status = 'resolved', resolution = {resolution}, note = {note},
        resolved_by = {resolved_by}, resolved_at = {now}
    WHERE review_id = {review_id}
"""
SETTLE_RECEIPT = """
    UPDATE callgate_receipts
    SET state = {resolution}, error_class = {error_class}, detail = {note}, lease_owner = NULL,
        lease_expires_at = NULL, updated_at = {now}
    WHERE operation_id = {operation_id}
"""
PURGE_RECEIPTS = """
    DELETE FROM callgate_receipts
    WHERE state IN ('succeeded', 'failed') AND updated_at < {cutoff}
"""
PURGE_REVIEWS = "DELETE FROM callgate_reviews WHERE status = 'resolved' AND resolved_at < {cutoff}"
# The hash of the decision log line of the decision that executed the write: kept once, so
# the statement may be sent twice and a later decision never replaces the line.
LINK_LOG_LINE = """
    UPDATE callgate_receipts SET log_line = {line}
    WHERE operation_id = {operation_id} AND log_line IS NULL
"""


class Write(NamedTuple):
    """A write whose row the protocol needs back, and how to read it without ``RETURNING``."""

    statement: Query
    refetch: Query  # reads the written row by the key among the write's own parameters


class Statements:
    """The protocol's statements in one dialect, rendered once per store class."""

    def __init__(self, dialect: Dialect) -> None:
        self.returns_rows = bool(dialect.returning)
        self.select_receipt = render(SELECT_RECEIPT, dialect)
        self.lock_receipt = render(SELECT_RECEIPT + dialect.row_lock, dialect)
        self.select_review = render(SELECT_REVIEW, dialect)
        self.lock_review = render(SELECT_REVIEW + dialect.row_lock, dialect)

        def receipt_write(template: str) -> Write:
            return Write(render(template + dialect.returning, dialect), self.select_receipt)

        def review_write(template: str) -> Write:
            return Write(render(template + dialect.returning, dialect), self.select_review)

        self.insert_claimed = receipt_write(INSERT_CLAIMED)
        # A new claim's row is its own parameters: whether it was created (the row count)
        # is all there is to learn, in one statement committed on its own.
        self.insert_new_claim = render(INSERT_CLAIMED, dialect)
        self.take_over = receipt_write(TAKE_OVER)
        self.renew = receipt_write(RENEW)
        self.finish = receipt_write(FINISH)
        # A finish of the claim this store object made, at the attempt it made it (a take-over
        # since, by a worker of any name, counts one more and misses this fence): the receipt
        # is the claim's and the finish's own parameters, so the row count is all that comes
        # back, on every dialect.
        finish_held = FINISH + " AND attempts = {attempts}"
        self.finish_held = render(finish_held, dialect)
        # The same with no error class and no detail, as every success has, spelled NULL
        # in the statement: sqlite3 binds a None parameter only after asking its adapters
        # for one, which raises and clears an AttributeError (about 2,600 instructions
        # each, two a success).
        self.finish_held_without_error = render(
            finish_held.replace("{error_class}", "NULL").replace("{detail}", "NULL"), dialect)
        self.insert_held = receipt_write(INSERT_HELD)
        self.claim_confirmed = receipt_write(CLAIM_CONFIRMED)
        self.insert_review = review_write(INSERT_REVIEW)
        self.move_to_review = render(MOVE_TO_REVIEW, dialect)
        self.list_receipts = render(LIST_RECEIPTS, dialect)
        self.list_reviews = render(LIST_REVIEWS, dialect)
        self.resolve_review = review_write(RESOLVE_REVIEW)
        self.settle_receipt = render(SETTLE_RECEIPT, dialect)
        self.purge_receipts = render(PURGE_RECEIPTS, dialect)
        self.purge_reviews = render(PURGE_REVIEWS, dialect)
        self.link_log_line = render(LINK_LOG_LINE, dialect)
