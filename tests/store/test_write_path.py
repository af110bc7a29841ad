"""The write path's cost in statements: what a new claim and a finish send to the database.

An executed write is one claim and one finish. Each is one statement committed on its own,
and neither reads anything back (a new operation ID needs only its row count; so does the
finish of the store's own claim, fenced by its lease and its attempt), so the store makes
the two durable commits the guarantees need and nothing more. The receipts they return are
the ones a read of the row gives back.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from callgate_rules.store import (
    ClaimOutcome,
    PostgresStore,
    ReceiptState,
    ReceiptStore,
    SqliteStore,
)
from callgate_rules.store.base import (
    Claim,
    Receipt,
    canonical_json,
    read_stored_json,
    stored_json,
)
from callgate_rules.store.postgres import JSONB
from callgate_rules.store.sqlite import RETURNING_SQLITE, _text
from tests.store.conftest import empty_postgres_tables
from tests.store.test_store_contract import LEASE, T0, operation

pytestmark = pytest.mark.skipif(sqlite3.sqlite_version_info < RETURNING_SQLITE,
                                reason=f"SQLite {sqlite3.sqlite_version} has no RETURNING")


@pytest.fixture
def traced(tmp_path: Path) -> Iterator[tuple[SqliteStore, list[str]]]:
    store = SqliteStore(tmp_path / "receipts.db")
    statements: list[str] = []
    store._connection().set_trace_callback(lambda sql: statements.append(" ".join(sql.split())))
    yield store, statements
    store.close()


def test_a_new_claim_is_one_statement_and_its_receipt_is_the_stored_one(
    traced: tuple[SqliteStore, list[str]],
) -> None:
    store, statements = traced
    claim = store.claim(operation("op-new"), worker="w1", lease=LEASE, now=T0)

    assert claim.outcome is ClaimOutcome.CLAIMED
    assert len(statements) == 1 and statements[0].startswith("INSERT INTO callgate_receipts")
    assert claim.receipt == store.get("op-new")
    # made without the dataclass's __init__ (``store.rows.made``), and the same all the same
    ordinary = Claim(ClaimOutcome.CLAIMED, claim.receipt)
    assert (claim, repr(claim)) == (ordinary, repr(ordinary))
    assert claim.may_execute


def test_a_finish_is_one_statement(traced: tuple[SqliteStore, list[str]]) -> None:
    store, statements = traced
    store.claim(operation("op-done"), worker="w1", lease=LEASE, now=T0)
    statements.clear()
    done = store.finish("op-done", worker="w1", state=ReceiptState.SUCCEEDED, now=T0,
                        result={"refund_id": "R-1"})

    assert len(statements) == 1 and statements[0].startswith("UPDATE callgate_receipts")
    assert "RETURNING" not in statements[0]  # its row count says it all
    assert done == store.get("op-done")
    assert (done.state, done.result, done.lease_owner) == (
        ReceiptState.SUCCEEDED, {"refund_id": "R-1"}, None)


def test_an_existing_operation_id_is_decided_under_the_write_lock(
    traced: tuple[SqliteStore, list[str]],
) -> None:
    store, statements = traced
    store.claim(operation("op-twice"), worker="w1", lease=LEASE, now=T0)
    statements.clear()
    again = store.claim(operation("op-twice"), worker="w2", lease=LEASE, now=T0)

    assert again.outcome is ClaimOutcome.BUSY
    assert "BEGIN IMMEDIATE" in statements and statements[-1] == "COMMIT"


def test_a_finish_committed_on_its_own_is_seen_by_another_connection(tmp_path: Path) -> None:
    path = tmp_path / "receipts.db"
    writer: ReceiptStore = SqliteStore(path)
    writer.claim(operation("op-seen"), worker="w1", lease=LEASE, now=T0)
    writer.finish("op-seen", worker="w1", state=ReceiptState.SUCCEEDED, now=T0, result=[1])
    reader = sqlite3.connect(path)
    try:
        row: Any = reader.execute(
            "SELECT state, result FROM callgate_receipts WHERE operation_id = 'op-seen'"
        ).fetchone()
    finally:
        reader.close()
        writer.close()
    assert tuple(row) == ("succeeded", "[1]")


# A finish after this store object's own claim builds its receipt from the claim's and its
# own parameters (``store.rows.Rows.finished``) instead of reading the row back: it must be
# exactly what a read gives, whichever way the lease was taken and whatever was written.

# PostgreSQL keeps no NUL character in text or jsonb (a StoreError there, not a receipt);
# a lone surrogate is no UTF-8 (the drivers refuse it).
TEXT = st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)),
               max_size=8)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=8)
OUTCOMES = st.sampled_from([ReceiptState.SUCCEEDED, ReceiptState.FAILED,
                            ReceiptState.OUTCOME_UNKNOWN])
TAKEN = st.sampled_from(["new", "after a lapsed lease", "confirmed"])


def take(store: ReceiptStore, how: str, operation_id: str, arguments: dict[str, Any]) -> Any:
    """The lease on a new operation, taken ``how``; the claim's receipt."""
    new = operation(operation_id, arguments=arguments)
    if how == "new":
        claim = store.claim(new, worker="w1", lease=LEASE, now=T0)
        assert claim.may_execute
    elif how == "after a lapsed lease":
        store.claim(new, worker="w0", lease=LEASE, now=T0)
        claim = store.claim(new, worker="w1", lease=LEASE, now=T0 + 2 * LEASE)
        assert claim.outcome is ClaimOutcome.RECONCILE
    else:
        store.hold_for_confirmation(new, expires_at=T0 + LEASE, now=T0)
        claim = store.claim_confirmed(operation_id, confirmed_by="dana", worker="w1",
                                      lease=LEASE, now=T0)
        assert claim.outcome is ClaimOutcome.CLAIMED
    return claim.receipt


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(how=TAKEN, state=OUTCOMES, result=JSON_VALUES,
       arguments=st.dictionaries(TEXT, JSON_VALUES, max_size=4),
       detail=st.none() | TEXT)
def test_a_claim_and_a_finish_return_what_a_read_of_the_row_gives(
    store: ReceiptStore, how: str, state: ReceiptState, result: Any, arguments: dict[str, Any],
    detail: str | None,
) -> None:
    operation_id = f"op-{uuid.uuid4().hex[:10]}"
    claimed = take(store, how, operation_id, arguments)
    assert_read_alike(claimed, store.get(operation_id))
    done = store.finish(operation_id, worker="w1", state=state, now=T0 + LEASE * 3,
                        result=result, error_class=None if state is ReceiptState.SUCCEEDED
                        else "transient", detail=detail)

    assert_read_alike(done, store.get(operation_id))


@pytest.mark.parametrize("value", [-0.0, [-0.0, 1e16, -0.5, "-0.0"], {"a": {"b": -0.0}}],
                         ids=["negative zero", "in a list", "in an object"])
def test_numbers_a_database_respells_are_returned_as_it_gives_them_back(
    store: ReceiptStore, value: Any,
) -> None:
    """jsonb keeps no negative zero and no exponent (``-0.0`` comes back ``0.0``, ``1e16`` as
    ``10000000000000000``): the receipts a claim and a finish build say what a read says."""
    claimed = store.claim(operation("op-respelled", arguments={"x": value}), worker="w1",
                          lease=LEASE, now=T0)
    assert_read_alike(claimed.receipt, store.get("op-respelled"))
    done = store.finish("op-respelled", worker="w1", state=ReceiptState.SUCCEEDED, now=T0,
                        result=value)
    assert_read_alike(done, store.get("op-respelled"))


def as_jsonb_reads(text: str) -> Any:
    """The values of ``text`` as jsonb keeps them, every float literal read as numeric
    writes it: in plain notation, no sign on zero (the slow reading, for every text)."""
    def number(literal: str) -> int | float:
        plain = format(Decimal(literal), "f")
        return float(plain) + 0.0 if "." in plain else int(plain)

    return json.loads(text, parse_float=number)


@settings(max_examples=300, deadline=None)
@given(value=JSON_VALUES | st.sampled_from([-0.0, 1e16, 1e23, [2.5e-7, "1e5"], {"-0.": -0.5}]))
def test_a_text_written_to_jsonb_is_given_back_as_jsonb_reads_it(value: Any) -> None:
    """``stored_json`` for a jsonb column (``JSONB``) reads each float of its text as
    jsonb keeps it, proving the text with that read: what it gives is what the slow reading
    gives, whichever way it went, and its text stands for what the plain store's does."""
    text, read = stored_json(value, JSONB)
    assert repr(read) == repr(as_jsonb_reads(text))
    assert repr(json.loads(text)) == repr(json.loads(stored_json(value)[0]))


@pytest.fixture(params=["sqlite", "postgres"])
def two_stores(request: pytest.FixtureRequest,
               tmp_path: Path) -> Iterator[tuple[ReceiptStore, ReceiptStore]]:
    """Two store objects on one database, as two processes open it."""
    def opened() -> ReceiptStore:
        if request.param == "sqlite":
            return SqliteStore(tmp_path / "receipts.db")
        return PostgresStore(request.getfixturevalue("postgres_url"),
                             schema=request.getfixturevalue("postgres_schema"))

    if request.param == "postgres":
        empty_postgres_tables(request.getfixturevalue("postgres_admin"),
                              request.getfixturevalue("postgres_schema"))
    first, second = opened(), opened()
    yield first, second
    first.close()
    second.close()


def test_a_finish_after_a_take_over_by_a_worker_of_the_same_name_reads_its_row(
    two_stores: tuple[ReceiptStore, ReceiptStore],
) -> None:
    """Two store objects whose workers share a name (two gates in two processes configured
    alike): the second takes the lapsed lease over, so the row is at attempt 2 while the
    first still holds its claim of attempt 1. The first's finish misses the attempt's fence
    and finishes as any finish does, returning the row as it is, never a receipt built
    from its stale claim."""
    store, other = two_stores
    first = store.claim(operation("op-same-name"), worker="w1", lease=LEASE, now=T0)
    again = other.claim(operation("op-same-name"), worker="w1", lease=LEASE,
                        now=T0 + 2 * LEASE)
    assert (first.receipt.attempts, again.outcome, again.receipt.attempts) == (
        1, ClaimOutcome.RECONCILE, 2)
    done = store.finish("op-same-name", worker="w1", state=ReceiptState.SUCCEEDED,
                        now=T0 + 2 * LEASE, result={"id": 1})

    assert_read_alike(done, store.get("op-same-name"))
    assert (done.attempts, done.state, done.lease_owner) == (2, ReceiptState.SUCCEEDED, None)


def assert_read_alike(built: Any, read: Any) -> None:
    """Equal, and equal in every JSON value's spelling: ``==`` takes 1e16 for 10**16, and a
    reader of the JSON does not (keys' order aside: jsonb keeps its own). Both are whole
    receipts, every field present in its order, as the dataclass's own ``__init__`` makes
    them (the stores make theirs without it: ``store.rows.made``)."""
    for receipt in (built, read):
        assert list(vars(receipt)) == [field.name for field in dataclasses.fields(Receipt)]
        assert Receipt(**vars(receipt)) == receipt
    assert built == read
    for field in ("arguments", "actor", "result"):
        assert canonical_json(getattr(built, field)) == canonical_json(getattr(read, field))


@settings(max_examples=300, deadline=None)
@given(value=JSON_VALUES | st.just(float("nan")) | st.just(float("inf"))
       | st.text(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), max_size=2))
def test_a_stored_text_is_read_as_the_standard_library_reads_it(value: Any) -> None:
    # read_stored_json: msgspec where it accepts the text, json.loads where it refuses it
    text = canonical_json(value)
    assert repr(read_stored_json(text)) == repr(json.loads(text))
    assert repr(read_stored_json(text.encode("utf-8", "surrogatepass"))) == repr(json.loads(text))



# canonical_json: msgspec writes what reads back as the value itself, the standard library
# everything else; the value a text stands for, and what is refused, are json's.

def standard_library(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


@settings(max_examples=300, deadline=None)
@given(value=st.recursive(
    JSON_VALUES | st.just(float("nan")) | st.just(float("-inf")) | st.text(
        st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=2),
    lambda inner: st.tuples(inner) | st.dictionaries(st.integers(0, 20), inner, max_size=2)
    | st.lists(inner, max_size=2), max_leaves=6))
def test_canonical_json_stands_for_what_the_standard_library_writes(value: Any) -> None:
    written, expected = canonical_json(value), standard_library(value)
    assert repr(json.loads(written)) == repr(json.loads(expected))
    assert canonical_json(value) == written  # one spelling per value


@pytest.mark.parametrize("refused", [datetime(2026, 1, 1), Decimal("1.5"), {1, 2}, b"x",
                                     {"when": datetime(2026, 1, 1)}, [{"n": Decimal(1)}]])
def test_canonical_json_refuses_what_the_standard_library_refuses(refused: Any) -> None:
    with pytest.raises(TypeError):
        standard_library(refused)
    with pytest.raises(TypeError):
        canonical_json(refused)


@settings(max_examples=300, deadline=None)
@given(moment=st.datetimes(timezones=st.timedeltas(timedelta(hours=-23), timedelta(hours=23))
                           .map(timezone) | st.just(UTC)))
def test_an_instant_is_written_as_iso_text_with_microseconds(moment: datetime) -> None:
    try:
        expected = moment.astimezone(UTC).isoformat(timespec="microseconds")
    except OverflowError:  # year 1 or 9999 pushed past the calendar by the offset
        return
    assert _text(moment) == expected


def test_instants_of_one_day_and_the_next_are_written_alike() -> None:
    """``_text`` keeps the last day's text: instants seconds apart on one day, then across
    into the next (and a year), each with a lease's expiry after it, are written as
    isoformat writes them."""
    start = datetime(2026, 12, 31, 23, 58, 57, 999_999, tzinfo=UTC)
    for step in range(400):
        moment = start + timedelta(seconds=step * 0.7) + step % 2 * LEASE
        assert _text(moment) == moment.isoformat(timespec="microseconds")
        east = moment.astimezone(timezone(timedelta(hours=5)))
        assert _text(east) == moment.isoformat(timespec="microseconds")
