"""Receipts and review items as the SQL stores read them: from a row, or from what a write
sent when the row need not be read back.

A receipt built without reading its row is exactly the one a read gives (instants and JSON as
the dialect reads them back); ``tests/store/test_write_path.py`` holds both ways equal. It is
built from the values in hand, not from the parameters' stored spelling: an instant in UTC
is what a read of its stored form gives, and a JSON value comes with the read of its text
that ``store.base.stored_json`` made to prove the text (a dialect that respells numbers,
as jsonb does, reads the text its own way: ``written_json``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from callgate_rules.store.base import (
    NewOperation,
    Receipt,
    ReceiptState,
    ReviewItem,
    ReviewStatus,
)
from callgate_rules.store.statements import Row


class Rows:
    """Rows read with one dialect's ``time`` (a stored instant as an aware datetime in UTC),
    ``json_value`` (a stored JSON column as Python values) and ``written_json`` (a JSON text
    the store writes and its read, ``store.base.stored_json``, as a read of the column will
    give it back: PostgreSQL's jsonb respells numbers and orders keys its own way)."""

    __slots__ = ("time", "json_value", "written_json")

    def __init__(self, time: Callable[[Any], datetime], json_value: Callable[[Any], Any],
                 written_json: Callable[[str, Any], Any]) -> None:
        self.time, self.json_value, self.written_json = time, json_value, written_json

    def finished(self, held: Receipt, parameters: Mapping[str, Any], *, state: ReceiptState,
                 at: datetime, result: tuple[str, Any] | None) -> Receipt:
        """The receipt ``finish_held`` wrote over the claim ``held`` (its row count said so)
        at ``at`` (in UTC), as a read of its row gives it: the claim's columns (only a
        holder's statements change them, and the fence of lease and attempt matched) and the
        finish's own (``result`` as ``stored_json`` gave it, as the database keeps it:
        PostgreSQL's jsonb writes 4.6e+16 as 46000000000000000)."""
        return _receipt({  # not dataclasses.replace, which reads every field by name first
            "operation_id": held.operation_id, "state": state,
            "request_id": held.request_id, "tool": held.tool,
            "contract_version": held.contract_version, "args_hash": held.args_hash,
            "arguments": held.arguments, "actor": held.actor, "created_at": held.created_at,
            "updated_at": at,
            "result": None if result is None else self.written_json(*result),
            "error_class": parameters["error_class"], "detail": parameters["detail"],
            "confirmed_by": held.confirmed_by, "confirmed_at": held.confirmed_at,
            "confirmation_expires_at": held.confirmation_expires_at,
            "lease_owner": None, "lease_expires_at": None, "attempts": held.attempts,
            "log_line": held.log_line})

    def is_finish_of(self, receipt: Receipt, parameters: Mapping[str, Any],
                     held: Receipt | None) -> bool:
        """Whether ``receipt`` is what the finish with ``parameters`` wrote (it landed before
        its connection was lost): its outcome, at its instant, the lease released, and, when
        the claim it finished is known, that claim's attempt (a take-over counts one more).
        (Not its result: the database may spell numbers its own way, as jsonb does.)"""
        return (receipt.state == parameters["state"] and receipt.lease_owner is None
                and receipt.updated_at == self.time(parameters["now"])
                and receipt.error_class == parameters["error_class"]
                and receipt.detail == parameters["detail"]
                and (held is None or receipt.attempts == held.attempts))

    def new_claim(self, op: NewOperation, *, worker: str, arguments: tuple[str, Any],
                  actor: tuple[str, Any], now: datetime, lease_expires_at: datetime) -> Receipt:
        """The receipt ``insert_new_claim`` just created (its row count said so), without
        reading it: from the values it wrote, the JSON ones as ``stored_json`` gave them and
        the instants in UTC, as a read gives them back."""
        return _receipt({
            "operation_id": op.operation_id, "state": ReceiptState.CLAIMED,
            "request_id": op.request_id, "tool": op.tool,
            "contract_version": op.contract_version, "args_hash": op.args_hash,
            "arguments": self.written_json(*arguments), "actor": self.written_json(*actor),
            "created_at": now, "updated_at": now, "result": None,
            "error_class": None, "detail": None, "confirmed_by": None, "confirmed_at": None,
            "confirmation_expires_at": None, "lease_owner": worker,
            "lease_expires_at": lease_expires_at, "attempts": 1, "log_line": None})

    def receipt(self, row: Row) -> Receipt:
        time, json_value = self.time, self.json_value
        confirmed_at, expires_at = row["confirmed_at"], row["confirmation_expires_at"]
        lease_expires_at = row["lease_expires_at"]
        return _receipt({
            "operation_id": row["operation_id"],
            "state": ReceiptState(row["state"]),
            "request_id": row["request_id"],
            "tool": row["tool"],
            "contract_version": row["contract_version"],
            "args_hash": row["args_hash"],
            "arguments": json_value(row["arguments"]),
            "actor": json_value(row["actor"]),
            "created_at": time(row["created_at"]),
            "updated_at": time(row["updated_at"]),
            "result": None if row["result"] is None else json_value(row["result"]),
            "error_class": row["error_class"],
            "detail": row["detail"],
            "confirmed_by": row["confirmed_by"],
            "confirmed_at": None if confirmed_at is None else time(confirmed_at),
            "confirmation_expires_at": None if expires_at is None else time(expires_at),
            "lease_owner": row["lease_owner"],
            "lease_expires_at": None if lease_expires_at is None else time(lease_expires_at),
            "attempts": row["attempts"],
            "log_line": row["log_line"],
        })

    def review(self, row: Row) -> ReviewItem:
        time, taken_at, resolved_at = self.time, row["taken_at"], row["resolved_at"]
        return ReviewItem(
            review_id=row["review_id"],
            tool=row["tool"],
            reason=row["reason"],
            summary=row["summary"],
            operation_id=row["operation_id"],
            payload=self.json_value(row["payload"]),
            status=ReviewStatus(row["status"]),
            created_at=time(row["created_at"]),
            taken_by=row["taken_by"],
            taken_at=None if taken_at is None else time(taken_at),
            resolution=row["resolution"],
            note=row["note"],
            resolved_by=row["resolved_by"],
            resolved_at=None if resolved_at is None else time(resolved_at),
        )


def _receipt(fields: dict[str, Any]) -> Receipt:
    """The receipt whose fields are ``fields``, every one of them, made without the
    dataclass's ``__init__``: a frozen dataclass sets each of its 19 fields through
    ``object.__setattr__`` (about 4 µs; a claim and its finish make two). It is the
    dataclass all the same (``==``, ``repr``, ``replace`` and ``fields`` see these values);
    ``tests/store/test_write_path.py`` holds every field present and each receipt equal to
    one made the ordinary way."""
    receipt = object.__new__(Receipt)
    object.__setattr__(receipt, "__dict__", fields)
    return receipt
