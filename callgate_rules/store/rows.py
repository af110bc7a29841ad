"""Receipts and review items as the SQL stores read them: from a row, or from what a write
sent when the row need not be read back.

A receipt built without reading its row is exactly the one a read gives (instants and JSON as
the dialect reads them back); ``tests/store/test_write_path.py`` holds both ways equal. It is
built from the values in hand, not from the parameters' stored spelling: an instant in UTC
is what a read of its stored form gives, and a JSON value comes with the read of its text
that ``store.base.stored_json`` made to prove the text, read as the dialect's column gives
it back (``written_json``: jsonb respells some numbers).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from callgate_rules.store.base import (
    NewOperation,
    Receipt,
    ReceiptState,
    ReviewItem,
    ReviewStatus,
    WrittenJson,
    made,
)
from callgate_rules.store.statements import Row

# The fields of a new claim's receipt in the dataclass's order (``vars`` of one made the
# ordinary way lists them so), each as every new claim has it; ``new_claim`` sets the rest.
_NEW_CLAIM: dict[str, Any] = {
    field.name: None if field.default is dataclasses.MISSING else field.default
    for field in dataclasses.fields(Receipt)} | {"state": ReceiptState.CLAIMED, "attempts": 1}


class Rows:
    """Rows read with one dialect's ``time`` (a stored instant as an aware datetime in UTC),
    ``json_value`` (a stored JSON column as Python values) and ``written_json`` (how its
    JSON column gives back a text written into it, which the store's ``stored_json`` reads
    the text with: PostgreSQL's jsonb respells numbers and orders keys its own way)."""

    __slots__ = ("time", "json_value", "written_json")

    def __init__(self, time: Callable[[Any], datetime], json_value: Callable[[Any], Any],
                 written_json: WrittenJson) -> None:
        self.time, self.json_value, self.written_json = time, json_value, written_json

    def finished(self, held: Receipt, parameters: Mapping[str, Any], *, state: ReceiptState,
                 at: datetime, result: tuple[str, Any] | None) -> Receipt:
        """The receipt ``finish_held`` wrote over the claim ``held`` (its row count said so)
        at ``at`` (in UTC), as a read of its row gives it: the claim's columns (only a
        holder's statements change them, and the fence of lease and attempt matched) and the
        finish's own (``result`` as ``stored_json`` gave it, as the database keeps it:
        PostgreSQL's jsonb writes 4.6e+16 as 46000000000000000)."""
        # The claim's fields copied, the finish's set over them: ``dataclasses.replace``
        # reads every field by name first, and a literal of all 20 costs twice as much.
        fields = vars(held).copy()
        fields["state"] = state
        fields["updated_at"] = at
        fields["result"] = None if result is None else result[1]
        fields["error_class"] = parameters["error_class"]
        fields["detail"] = parameters["detail"]
        fields["lease_owner"] = fields["lease_expires_at"] = None
        return made(Receipt, fields)

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
        # What every new claim has alike copied, its own set over it: a literal of all 20
        # fields costs twice as much.
        fields = _NEW_CLAIM.copy()
        fields["operation_id"] = op.operation_id
        fields["request_id"] = op.request_id
        fields["tool"] = op.tool
        fields["contract_version"] = op.contract_version
        fields["args_hash"] = op.args_hash
        fields["arguments"] = arguments[1]
        fields["actor"] = actor[1]
        fields["created_at"] = fields["updated_at"] = now
        fields["lease_owner"] = worker
        fields["lease_expires_at"] = lease_expires_at
        return made(Receipt, fields)

    def receipt(self, row: Row) -> Receipt:
        time, json_value = self.time, self.json_value
        confirmed_at, expires_at = row["confirmed_at"], row["confirmation_expires_at"]
        lease_expires_at = row["lease_expires_at"]
        return made(Receipt, {
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
