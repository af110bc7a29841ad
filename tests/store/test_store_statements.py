"""The protocol's SQL templates rendered per dialect: placeholders, casts, locks, RETURNING."""

from __future__ import annotations

import pytest

from callgate_rules.store.postgres import POSTGRES
from callgate_rules.store.sqlite import SQLITE
from callgate_rules.store.statements import Dialect, Statements, render

TEMPLATE = "UPDATE t SET a = {now}, b = {payload:json} WHERE c = {status:text} OR d = {now}"
PARAMETERS = {"now": "N", "payload": "P", "status": "S", "unused": "U"}


def test_sqlite_spells_every_parameter_as_a_question_mark() -> None:
    query = render(TEMPLATE, SQLITE)

    assert query.sql == "UPDATE t SET a = ?, b = ? WHERE c = ? OR d = ?"
    assert query.arguments(PARAMETERS) == ("N", "P", "S", "N")


def test_postgres_casts_json_and_untyped_text_parameters() -> None:
    query = render(TEMPLATE, POSTGRES)

    assert query.sql == "UPDATE t SET a = %s, b = %s::jsonb WHERE c = %s::text OR d = %s"
    assert query.arguments(PARAMETERS) == ("N", "P", "S", "N")


@pytest.mark.parametrize(
    ("template", "arguments"),
    [("SELECT 1", ()), ("SELECT {now}", ("N",))],
)
def test_statements_with_none_or_one_parameter_get_a_tuple(
    template: str, arguments: tuple[str, ...]
) -> None:
    assert render(template, SQLITE).arguments(PARAMETERS) == arguments


def test_a_parameter_type_the_dialect_does_not_know_is_refused() -> None:
    with pytest.raises(KeyError):
        render("SELECT {payload:xml}", SQLITE)


def test_postgres_locks_the_rows_it_decides_from_and_returns_what_it_writes() -> None:
    statements = Statements(POSTGRES)

    assert statements.lock_receipt.sql.endswith(" FOR UPDATE")
    assert statements.lock_review.sql.endswith(" FOR UPDATE")
    assert statements.select_receipt.sql.endswith("operation_id = %s")
    assert statements.finish.statement.sql.endswith(" RETURNING *")
    assert statements.returns_rows


def test_sqlite_reads_written_rows_back_inside_its_write_lock() -> None:
    statements = Statements(SQLITE)

    assert statements.lock_receipt.sql == statements.select_receipt.sql
    assert "RETURNING" not in statements.finish.statement.sql
    assert statements.finish.refetch == statements.select_receipt
    assert statements.resolve_review.refetch == statements.select_review
    assert not statements.returns_rows


def test_lease_holder_writes_are_fenced_by_worker_and_state() -> None:
    plain = Dialect(placeholder="?", casts={"json": "", "text": ""}, row_lock="", returning="")
    statements = Statements(plain)

    for write in (statements.renew, statements.finish):
        assert "WHERE operation_id = ? AND state = 'claimed' AND lease_owner = ?" in (
            write.statement.sql
        )
    assert statements.claim_confirmed.statement.sql.rstrip().endswith(
        "WHERE operation_id = ? AND state = 'awaiting_confirmation'"
    )
