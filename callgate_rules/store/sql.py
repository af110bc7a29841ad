"""The receipt protocol in SQL, written once for every dialect callgate speaks.

``SqlReceiptStore`` holds each method of the ``ReceiptStore`` contract once (the run
history's in ``store.sql_history``, a part it is made of). It writes with
``INSERT ... ON CONFLICT DO NOTHING`` (the primary key decides who creates a receipt), reads
what it decides from with the dialect's row lock, lets the rules of ``store.base`` decide,
and changes a row only through a statement whose ``WHERE`` clause is the guarantee (the
statements are in ``store.statements``):

- a lease: ``state = 'claimed' AND lease_owner = {worker}``, else ``LeaseLost``;
- a confirmation is used once: ``state = 'awaiting_confirmation'``, re-checked by the
  database after any concurrent confirmation commits;
- an operation ID names one set of arguments: the existing receipt's ``args_hash`` is
  compared under the lock, else ``OperationIdReused``;
- an expired lease is taken over for reconciliation, as ``claim_outcome`` says.

A dialect subclass (``SqliteStore``, ``PostgresStore``) supplies only what differs:

- ``_sql``: the statements rendered for its ``Dialect`` (placeholders, the casts JSON and
  text parameters need, the clause that locks a row read to decide a write, and whether a
  write returns its row or the row is read back by its key in the same transaction);
- ``_write()`` and ``_read()``: a cursor inside a transaction, the driver's errors raised as
  ``StoreError``;
- how instants and JSON values are stored (``_time_parameter``, ``_time_value``,
  ``_json_value``);
- ``_take_oldest_open_review``: how two reviewers are kept from taking the same item;
- connections, migrations (``pending_migrations`` checks the version) and privileges.
"""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from collections.abc import Mapping
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import Any, ClassVar

from callgate_rules.errors import LeaseLost, StoreConfigError, StoreError
from callgate_rules.store.base import (
    AS_WRITTEN,
    Claim,
    ClaimOutcome,
    ClosesOnExit,
    NewOperation,
    NewReviewItem,
    Receipt,
    ReceiptState,
    ReviewItem,
    ReviewStatus,
    WrittenJson,
    as_utc,
    canonical_json,
    check_outcome_state,
    check_resolution,
    check_same_arguments,
    claim_outcome,
    lease_lost_message,
    made,
    replayed_confirmation_outcome,
    resolved_error_class,
    stored_json,
)
from callgate_rules.store.driver_errors import DriverErrors as DriverErrors  # dialects use it
from callgate_rules.store.history import HistoryStatements
from callgate_rules.store.intents import SqlRunIntents
from callgate_rules.store.rows import Rows
from callgate_rules.store.scoping import Scope, scope_predicate
from callgate_rules.store.sessions import SessionStatements
from callgate_rules.store.sql_history import SqlRunHistory
from callgate_rules.store.statements import (
    Cursor,
    Dialect,
    Query,
    Row,
    Statements,
    Write,
    execute,
    render,
)

# The listings of a caller with a scope (``store.scoping``): the condition is made per call
SCOPED_RECEIPTS = """
    SELECT * FROM callgate_receipts WHERE state = {{state}} AND ({condition})
    ORDER BY created_at, operation_id LIMIT {{limit}}
"""
SCOPED_REVIEWS = """
    SELECT * FROM callgate_reviews
    WHERE ({{status:text}} IS NULL OR status = {{status:text}}) AND ({condition})
    ORDER BY created_at, queue_position
"""

# How often a claim or hold starts over when the receipt it collided with was purged before
# it could be read; a purge only takes receipts finished long ago, so once is plenty.
VANISHED_RETRIES = 3
# Read once: on Python 3.11 ``EnumType.__getattr__`` slows every read of a member from its class.
_CLAIMED = ClaimOutcome.CLAIMED
# How many claims a store object keeps for their finishes (``SqlReceiptStore._held``): one
# per write in flight, so far more than a process has threads.
HELD_LIMIT = 4096


class SqlReceiptStore(SqlRunHistory, SqlRunIntents, ClosesOnExit, ABC):
    """A ``ReceiptStore`` in an SQL database; subclasses bring the dialect and connections."""

    url: str
    _sql: ClassVar[Statements]
    _dialect: ClassVar[Dialect]  # for the statements made per call (a caller's scope)
    _payload_actor: ClassVar[str]  # a review item's payload.actor, as a JSON expression
    _history_sql: ClassVar[HistoryStatements]
    _sessions_sql: ClassVar[SessionStatements]
    _driver_error: type[Exception]  # the driver's base exception, raised as StoreError
    # how a JSON column gives back the text written into it: as written, where the column
    # keeps the text (jsonb differs)
    _written_json: ClassVar[WrittenJson] = AS_WRITTEN

    # Receipts ------------------------------------------------------------------------------

    def __init__(self) -> None:
        # The receipts of the claims this store object made and not yet finished, by
        # operation ID: a finish builds its receipt from its claim's instead of reading the
        # row back (``finish``). Bounded: a claim never finished is forgotten, not leaked.
        self._held: dict[str, Receipt] = {}
        self._rows = Rows(self._time_value, self._json_value, self._written_json)
        self._driver_errors = DriverErrors(self, _nothing)  # stateless: made once

    def claim(
        self, op: NewOperation, *, worker: str, lease: timedelta, now: datetime
    ) -> Claim:
        now = as_utc(now)
        lease_expires_at = now + lease
        column = self._rows.written_json
        arguments, actor = stored_json(op.arguments, column), stored_json(op.actor, column)
        parameters = _operation_parameters(op, arguments[0], actor[0],
                                           self._lease(worker, lease_expires_at, now))
        # The common case, a new operation ID, is one statement committed on its own; the
        # primary key decides, so a concurrent claim of the same ID finds the row below. It
        # may be sent twice (``_sent``): a second INSERT of a row the first made creates
        # nothing, and the row is then decided below like anyone's (busy, as its lease is
        # live), so a lost connection never makes a second holder.
        written, _, _ = self._sent(self._sql.insert_new_claim, parameters)
        if written == 1:
            return self._holding(_CLAIMED, self._rows.new_claim(
                op, worker=worker, arguments=arguments, actor=actor, now=now,
                lease_expires_at=lease_expires_at))
        # The ID exists: decide under the row lock. A receipt purged between the INSERT and
        # the SELECT sends us round once more.
        for _ in range(VANISHED_RETRIES):
            with self._write() as cursor:
                created = self._written(cursor, self._sql.insert_claimed, parameters)
                if created is not None:
                    return self._holding(_CLAIMED, self._rows.receipt(created))
                existing = self._existing(cursor, self._sql.lock_receipt, op)
                if existing is None:
                    continue
                outcome = claim_outcome(existing, now=now)
                if outcome in (ClaimOutcome.BUSY, ClaimOutcome.EXISTING):
                    return Claim(outcome, existing)
                taken = self._written(cursor, self._sql.take_over, parameters)
                return self._holding(outcome, self._rows.receipt(_required(taken)))
        raise StoreError(f"receipt {op.operation_id!r} kept vanishing while being claimed")

    def renew(self, operation_id: str, *, worker: str, lease: timedelta, now: datetime) -> Receipt:
        now = as_utc(now)
        parameters = {"operation_id": operation_id,
                      **self._lease(worker, now + lease, now)}
        renewed = self._write_one(self._sql.renew, parameters)
        if renewed is None:
            raise LeaseLost(lease_lost_message(operation_id, worker))
        return self._rows.receipt(renewed)

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
        stored_result = None if result is None else stored_json(result,
                                                                self._rows.written_json)
        held = self._held.pop(operation_id, None)
        parameters = {
            # str(): its text, as ``state.value`` is, without the enum's property descriptor
            "operation_id": operation_id, "worker": worker, "state": str(state),
            "result": None if stored_result is None else stored_result[0],
            "error_class": error_class, "detail": detail, "now": self._time_parameter(now),
            # the fence of ``finish_held`` (the general finish names no attempt)
            "attempts": None if held is None else held.attempts,
        }
        if held is not None and held.lease_owner == worker:
            # The common case, the claim this store object made: one statement fenced by the
            # lease and the claim's attempt, its row count all that comes back. It may be
            # sent twice (``_sent``): a second matches nothing when the first landed, and the
            # row then shows it did.
            written, _, again = self._sent(
                self._sql.finish_held if error_class is not None or detail is not None
                else self._sql.finish_held_without_error, parameters)
            if written == 1:
                return self._rows.finished(held, parameters, state=state, at=now,
                                           result=stored_result)
            landed = self.get(operation_id) if again else None
            if landed is not None and self._rows.is_finish_of(landed, parameters, held):
                return landed
            # Not at that attempt: the claim was taken over since, so ``held`` no longer says
            # which attempt the row is at; finish as any finish does.
            held = None
        if not self._sql.returns_rows:
            finished = self._write_one(self._sql.finish, parameters)
            if finished is None:
                raise LeaseLost(lease_lost_message(operation_id, worker))
            return self._rows.receipt(finished)
        # One statement, fenced by the lease, so it may be sent twice, as above.
        _, rows, again = self._sent(self._sql.finish.statement, parameters)
        if rows:
            return self._rows.receipt(rows[0])
        landed = self.get(operation_id) if again else None
        if landed is not None and self._rows.is_finish_of(landed, parameters, held):
            return landed
        raise LeaseLost(lease_lost_message(operation_id, worker))

    def hold_for_confirmation(
        self, op: NewOperation, *, expires_at: datetime, now: datetime, detail: str | None = None
    ) -> Receipt:
        stored_now = self._time_parameter(now)
        expires = self._time_parameter(expires_at)
        parameters = _operation_parameters(
            op, canonical_json(op.arguments), canonical_json(op.actor),
            {"expires_at": expires, "now": stored_now, "detail": detail})
        # As in ``claim``: a receipt purged before it could be read sends us round again.
        for _ in range(VANISHED_RETRIES):
            with self._write() as cursor:
                created = self._written(cursor, self._sql.insert_held, parameters)
                if created is not None:
                    return self._rows.receipt(created)
                existing = self._existing(cursor, self._sql.select_receipt, op)
                if existing is not None:
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
        parameters = {
            "operation_id": operation_id, "confirmed_by": confirmed_by,
            **self._lease(worker, now + lease, now),
        }
        with self._write() as cursor:
            # The state condition is re-checked after any concurrent confirmation commits, so
            # of two replays of one confirmation only the first matches.
            claimed = self._written(cursor, self._sql.claim_confirmed, parameters)
            if claimed is not None:
                return self._holding(_CLAIMED, self._rows.receipt(claimed))
            execute(cursor, self._sql.select_receipt, parameters)
            row = cursor.fetchone()
        if row is None:
            raise StoreError(f"no receipt for operation {operation_id!r} to confirm")
        existing = self._rows.receipt(row)
        return Claim(replayed_confirmation_outcome(existing, now=now), existing)

    def get(self, operation_id: str) -> Receipt | None:
        with self._read() as cursor:
            execute(cursor, self._sql.select_receipt, {"operation_id": operation_id})
            row = cursor.fetchone()
        return None if row is None else self._rows.receipt(row)

    def link_log_line(self, operation_id: str, line: str) -> bool:
        # Atomic, not durable, as the log line itself is (flushed, not synced): a durable
        # commit would cost an executed write a third fsync (3-4 ms here); a link lost with
        # a crash of the machine reads as a receipt that names no line.
        with self._lease_statement() as cursor:
            execute(cursor, self._sql.link_log_line, {"operation_id": operation_id,
                                                      "line": line})
            return cursor.rowcount == 1

    def list_receipts(self, *, state: ReceiptState, limit: int = 100,
                      scope: Scope | None = None) -> list[Receipt]:
        parameters: dict[str, Any] = {"state": state.value, "limit": limit}
        query = self._sql.list_receipts
        if scope is not None and not scope.is_everything:
            condition, given = scope_predicate(scope, actor_column="actor", tool_column="tool",
                                               field_text=self._field_text)
            query = render(SCOPED_RECEIPTS.format(condition=condition), self._dialect)
            parameters.update(given)
        with self._read() as cursor:
            execute(cursor, query, parameters)
            rows = cursor.fetchall()
        return [self._rows.receipt(row) for row in rows]

    # Review queue --------------------------------------------------------------------------

    def open_review(self, item: NewReviewItem, *, now: datetime) -> ReviewItem:
        parameters = {
            "review_id": str(uuid.uuid4()), "tool": item.tool, "reason": item.reason,
            "summary": item.summary, "operation_id": item.operation_id,
            "payload": canonical_json(item.payload), "now": self._time_parameter(now),
        }
        with self._write() as cursor:
            review = self._written(cursor, self._sql.insert_review, parameters)
            if item.operation_id is not None:
                execute(cursor, self._sql.move_to_review, parameters)
        if item.operation_id is not None:
            self._held.pop(item.operation_id, None)  # a person decides now, not a finish
        return self._rows.review(_required(review))

    def list_reviews(self, *, status: ReviewStatus | None = None,
                     scope: Scope | None = None) -> list[ReviewItem]:
        parameters: dict[str, Any] = {"status": None if status is None else status.value}
        query = self._sql.list_reviews
        if scope is not None and not scope.is_everything:
            condition, given = self._review_scope(scope)
            query = render(SCOPED_REVIEWS.format(condition=condition), self._dialect)
            parameters.update(given)
        with self._read() as cursor:
            execute(cursor, query, parameters)
            rows = cursor.fetchall()
        return [self._rows.review(row) for row in rows]

    def take_review(self, *, reviewer: str, now: datetime,
                    scope: Scope | None = None) -> ReviewItem | None:
        condition, given = self._review_scope(scope)
        parameters = {"reviewer": reviewer, "now": self._time_parameter(now), **given}
        with self._write() as cursor:
            taken = self._take_oldest_open_review(cursor, parameters, condition)
        return None if taken is None else self._rows.review(taken)

    def _review_scope(self, scope: Scope | None) -> tuple[str, dict[str, Any]]:
        """A review item's actor is its receipt's, else the one its payload recorded."""
        actor = (f"COALESCE((SELECT r.actor FROM callgate_receipts r WHERE r.operation_id = "
                 f"callgate_reviews.operation_id), {self._payload_actor})")
        return scope_predicate(scope, actor_column=actor, tool_column="callgate_reviews.tool",
                               field_text=self._field_text)

    def resolve_review(
        self, review_id: str, *, resolution: str, note: str, by: str, now: datetime
    ) -> ReviewItem:
        check_resolution(resolution)
        parameters = {
            "review_id": review_id, "resolution": resolution, "note": note, "resolved_by": by,
            "now": self._time_parameter(now),
        }
        with self._write() as cursor:
            execute(cursor, self._sql.lock_review, parameters)
            row = cursor.fetchone()
            if row is None:
                raise StoreError(f"no review item {review_id!r}")
            if row["status"] == ReviewStatus.RESOLVED.value:
                raise StoreError(f"review item {review_id!r} is already resolved")
            written = self._written(cursor, self._sql.resolve_review, parameters)
            resolved = self._rows.review(_required(written))
            if resolved.operation_id is not None:
                settled = {
                    **parameters,
                    "operation_id": resolved.operation_id,
                    "error_class": resolved_error_class(resolution, resolved.reason),
                }
                execute(cursor, self._sql.settle_receipt, settled)
        return resolved

    # Housekeeping --------------------------------------------------------------------------

    def purge(self, *, older_than: datetime) -> int:
        parameters = {"cutoff": self._time_parameter(older_than)}
        with self._write() as cursor:
            execute(cursor, self._sql.purge_receipts, parameters)
            receipts = cursor.rowcount
            execute(cursor, self._sql.purge_reviews, parameters)
            return receipts + cursor.rowcount

    # The review page's sessions (store.sessions) -------------------------------------------

    def open_page_session(self, session_id: str, *, login: str, now: datetime,
                          expires_at: datetime) -> None:
        with self._statement() as cursor:
            execute(cursor, self._sessions_sql.insert, {
                "session_id": session_id, "login": login, "now": self._time_parameter(now),
                "expires_at": self._time_parameter(expires_at)})

    def touch_page_session(self, session_id: str, *, now: datetime,
                           idle_cutoff: datetime) -> bool:
        with self._statement() as cursor:
            execute(cursor, self._sessions_sql.touch, {
                "session_id": session_id, "now": self._time_parameter(now),
                "idle_cutoff": self._time_parameter(idle_cutoff)})
            return cursor.rowcount == 1

    def revoke_page_session(self, session_id: str, *, now: datetime) -> bool:
        with self._statement() as cursor:
            execute(cursor, self._sessions_sql.revoke, {
                "session_id": session_id, "now": self._time_parameter(now)})
            return cursor.rowcount == 1

    def purge_page_sessions(self, *, now: datetime, idle_cutoff: datetime) -> int:
        with self._statement() as cursor:
            execute(cursor, self._sessions_sql.purge, {
                "now": self._time_parameter(now),
                "idle_cutoff": self._time_parameter(idle_cutoff)})
            return cursor.rowcount

    # What a dialect supplies ---------------------------------------------------------------

    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def _write(self) -> AbstractContextManager[Cursor]:
        """A cursor in a transaction that holds what it reads until it commits or rolls back."""

    @abstractmethod
    def _read(self) -> AbstractContextManager[Cursor]:
        """A cursor for reading one consistent answer."""

    def _statement(self) -> AbstractContextManager[Cursor]:
        """A cursor whose every statement is a transaction of its own (autocommit): one
        round trip and one durable commit for a write that needs nothing else."""
        return self._write()

    def _lease_statement(self) -> AbstractContextManager[Cursor]:
        """A cursor for a run lease's one statement (and a receipt's log line link). A lease
        must be atomic, not durable: one lost with a crash of the machine or the database
        was held by a decision whose own writes failed with it; so a dialect may commit it
        without waiting for the disk (two durable commits would cost a decision 6 ms
        here)."""
        return self._statement()

    @abstractmethod
    def _take_oldest_open_review(
        self, cursor: Cursor, parameters: Mapping[str, Any], condition: str = "1 = 1"
    ) -> Row | None:
        """Mark the oldest open item taken by ``{reviewer}`` at ``{now}`` and return its row,
        so that two reviewers never get the same item; None when the queue is empty. Only
        items matching ``condition`` (a template over ``callgate_reviews``, its parameters
        among ``parameters``: the caller's scope) are considered."""

    @staticmethod
    @abstractmethod
    def _field_text(column: str, name_parameter: str, /) -> str:
        """The text of the field ``{name_parameter}`` of the JSON expression ``column``, or
        NULL when that field is missing or not text (``store.scoping``)."""

    @staticmethod
    @abstractmethod
    def _time_parameter(moment: datetime, /) -> Any:
        """``moment`` as the database stores it (naive datetimes are refused)."""

    @staticmethod
    @abstractmethod
    def _time_value(stored: Any, /) -> datetime:
        """A stored instant as an aware datetime in UTC."""

    @staticmethod
    @abstractmethod
    def _json_value(stored: Any, /) -> Any:
        """A stored JSON column as Python values."""


    def _connection_lost(self, error: BaseException | None) -> bool:
        """Whether ``error`` says the connection went away (so the statement may not have
        reached the server): a file's connection never does."""
        return False

    def _describe_error(self, error: Exception) -> str:
        return str(error)

    def _errors_as_store_errors(self) -> DriverErrors[None]:
        return self._driver_errors

    def _store_error(self, error: Exception) -> StoreError:
        return StoreError(f"receipt store {self.url}: {self._describe_error(error)}")

    # Parameters and rows -------------------------------------------------------------------

    def _lease(self, worker: str, expires_at: datetime, now: datetime) -> dict[str, Any]:
        """The parameters of a lease ``worker`` takes at ``now`` until ``expires_at`` (both
        in UTC)."""
        return {
            "worker": worker,
            "lease_expires_at": self._time_parameter(expires_at),
            "now": self._time_parameter(now),
        }

    def _written(self, cursor: Cursor, write: Write, parameters: Mapping[str, Any]) -> Row | None:
        """The row ``write`` inserted or updated, or None if it matched none.

        Without ``RETURNING`` the row is read back by its key; the transaction holds it, so
        it is the row just written.
        """
        execute(cursor, write.statement, parameters)
        if self._sql.returns_rows:
            # Read to the end: SQLite commits an autocommitted statement once it is done.
            rows = cursor.fetchall()
            return rows[0] if rows else None
        if cursor.rowcount != 1:
            return None
        execute(cursor, write.refetch, parameters)
        return _required(cursor.fetchone())

    def _sent(self, query: Query, parameters: Mapping[str, Any]) -> Sent:
        """``query`` committed on its own: the rows it wrote, the rows it returned, and
        whether it was sent a second time. When its connection was lost, so that whether it
        ran is unknown, it is sent once more on a fresh connection (the pool replaces a dead
        one): only for statements that may be sent twice, as the claim's INSERT and the
        finish's fenced UPDATE may."""
        try:
            return self._send(query, parameters, again=False)
        except StoreError as error:
            if not self._connection_lost(error.__cause__):
                raise
        return self._send(query, parameters, again=True)

    def _send(self, query: Query, parameters: Mapping[str, Any], *, again: bool) -> Sent:
        with self._statement() as cursor:
            execute(cursor, query, parameters)
            if query.returns_rows:
                # Read to the end: SQLite commits an autocommitted statement once it is done.
                rows = cursor.fetchall()
                return len(rows), rows, again
            return cursor.rowcount, [], again

    def _holding(self, outcome: ClaimOutcome, receipt: Receipt) -> Claim:
        """The claim of ``receipt``, which holds the lease, kept for its finish."""
        held = self._held
        if len(held) >= HELD_LIMIT:  # claims never finished (their holders failed)
            try:
                del held[next(iter(held))]  # the oldest
            except (RuntimeError, StopIteration, KeyError):  # another thread changed it
                held.clear()
        held[receipt.operation_id] = receipt
        return made(Claim, {"outcome": outcome, "receipt": receipt})

    def _write_one(self, write: Write, parameters: Mapping[str, Any]) -> Row | None:
        """``write`` on its own: with ``RETURNING`` one autocommitted statement, else in a
        transaction that reads the row back."""
        with self._statement() if self._sql.returns_rows else self._write() as cursor:
            return self._written(cursor, write, parameters)

    def _existing(self, cursor: Cursor, statement: Query, op: NewOperation) -> Receipt | None:
        """The receipt ``op`` collided with, read with ``statement``; None if it is gone.

        Raises ``OperationIdReused`` when it records other arguments.
        """
        execute(cursor, statement, {"operation_id": op.operation_id})
        row = cursor.fetchone()
        if row is None:
            return None
        existing = self._rows.receipt(row)
        check_same_arguments(existing, op)
        return existing

# What one statement committed on its own did (``_sent``): the rows it wrote, the rows it
# returned, whether it was sent again. A plain tuple costs a quarter of a NamedTuple's.
Sent = tuple[int, list[Row], bool]


def _nothing() -> None:
    return None


def pending_migrations(
    url: str, migrations: list[tuple[int, list[str]]], current: int
) -> list[tuple[int, list[str]]]:
    """The migrations a schema at version ``current`` has not seen yet, oldest first.

    Raises ``StoreConfigError`` when the schema is newer than this callgate knows.
    """
    latest = migrations[-1][0]
    if current > latest:
        raise StoreConfigError(
            f"cannot open receipt store {url}: its schema version {current} is "
            f"newer than this callgate supports ({latest}); upgrade callgate"
        )
    return [(version, statements) for version, statements in migrations if version > current]


def _operation_parameters(op: NewOperation, arguments: str, actor: str,
                          more: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters of ``op``'s receipt, its arguments and actor as canonical JSON, and
    ``more``."""
    return {"operation_id": op.operation_id, "request_id": op.request_id, "tool": op.tool,
            "contract_version": op.contract_version, "args_hash": op.args_hash,
            "arguments": arguments, "actor": actor, **more}


def _required(row: Row | None) -> Row:
    if row is None:
        raise StoreError("a row written in this transaction could not be read back")
    return row
