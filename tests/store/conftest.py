"""Fixtures for the receipt store tests: one ``store`` per implementation.

PostgreSQL tests need ``CALLGATE_TEST_POSTGRES_URL``. Each test session works in schemas of
its own (named after a random run ID) and drops them at the end, so concurrent runs against
one server cannot see each other's rows.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from callgate_rules.store import MemoryStore, PostgresStore, ReceiptStore, SqliteStore
from callgate_rules.store.sqlite import SQLITE
from callgate_rules.store.statements import Statements

POSTGRES_URL_VARIABLE = "CALLGATE_TEST_POSTGRES_URL"
POSTGRES_SKIP_REASON = (
    "CALLGATE_TEST_POSTGRES_URL is not set; PostgreSQL store tests need a server (see README)"
)


@pytest.fixture(scope="session")
def postgres_url() -> str:
    url = os.environ.get(POSTGRES_URL_VARIABLE)
    if not url:
        pytest.skip(POSTGRES_SKIP_REASON)
    return url


@pytest.fixture(scope="session")
def postgres_admin(postgres_url: str) -> Iterator[Any]:
    """A plain autocommit connection for setting up and inspecting what stores do."""
    import psycopg

    with psycopg.connect(postgres_url, autocommit=True) as connection:
        yield connection


@pytest.fixture(scope="session")
def postgres_run_prefix(postgres_admin: Any) -> Iterator[str]:
    """The prefix of every schema this session creates; all of them go at the end."""
    from psycopg import sql

    prefix = f"callgate_test_{uuid.uuid4().hex[:10]}"
    yield prefix
    leftovers = postgres_admin.execute(
        "SELECT nspname FROM pg_namespace WHERE starts_with(nspname, %s)", (prefix,)
    ).fetchall()
    for (schema,) in leftovers:
        postgres_admin.execute(
            sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema))
        )


@pytest.fixture(scope="session")
def postgres_schema(postgres_run_prefix: str) -> str:
    """The schema the contract and process tests share; tests use unique operation IDs or
    start from emptied tables."""
    return f"{postgres_run_prefix}_shared"


@pytest.fixture
def new_postgres_schema(postgres_run_prefix: str) -> Callable[[], str]:
    """Names for schemas a test wants to itself (e.g. to watch migrations run)."""
    return lambda: f"{postgres_run_prefix}_{uuid.uuid4().hex[:8]}"


def empty_postgres_tables(admin: Any, schema: str) -> None:
    from psycopg import sql

    exists = admin.execute(
        "SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)
    ).fetchone()
    if exists is not None:
        admin.execute(
            sql.SQL("TRUNCATE {}.callgate_receipts, {}.callgate_reviews").format(
                sql.Identifier(schema), sql.Identifier(schema)
            )
        )


class SqliteStoreWithoutReturning(SqliteStore):
    """The SQLite store as it runs on SQLite older than 3.35.5, which has no ``RETURNING``:
    a written row is read back by its key in the same transaction."""

    _sql = Statements(SQLITE)


@pytest.fixture(params=["memory", "sqlite", "sqlite without RETURNING", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ReceiptStore]:
    opened: ReceiptStore
    if request.param == "memory":
        opened = MemoryStore()
    elif request.param == "sqlite":
        opened = SqliteStore(tmp_path / "receipts.db")
    elif request.param == "sqlite without RETURNING":
        opened = SqliteStoreWithoutReturning(tmp_path / "receipts.db")
    else:
        url = request.getfixturevalue("postgres_url")
        schema = request.getfixturevalue("postgres_schema")
        empty_postgres_tables(request.getfixturevalue("postgres_admin"), schema)
        opened = PostgresStore(url, schema=schema)
    yield opened
    opened.close()
