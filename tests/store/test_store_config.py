"""Opening stores: URL forms, migrations, and one-line errors for every bad configuration."""

from __future__ import annotations

import socket
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from callgate_rules.errors import StoreConfigError
from callgate_rules.store import MemoryStore, PostgresStore, SqliteStore, open_store, redact_url
from callgate_rules.store.postgres import INSTALL_HINT

PASSWORD = "hunter2-do-not-print"


def assert_one_clean_line(error: StoreConfigError) -> str:
    message = str(error)
    assert "\n" not in message
    assert "Traceback" not in message
    assert PASSWORD not in message
    # Nothing chained, so nothing but this line is printed when it reaches the user.
    assert error.__cause__ is None
    assert error.__context__ is None or error.__suppress_context__
    return message


def with_url_parts(url: str, *, user: str | None = None, password: str | None = None,
                   port: int | None = None, database: str | None = None) -> str:
    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    netloc = f"{user or parts.username or ''}"
    if password is not None:
        netloc += f":{password}"
    netloc += f"@{host}:{port or parts.port or 5432}"
    path = f"/{database}" if database is not None else parts.path
    return urlunsplit((parts.scheme, netloc, path, parts.query, ""))


def unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# open_store URL forms ----------------------------------------------------------------------


def test_memory_url_opens_a_memory_store() -> None:
    store = open_store("memory:")

    assert isinstance(store, MemoryStore)
    assert store.url == "memory:"


def test_sqlite_url_with_three_slashes_is_relative(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()

    store = open_store("sqlite:///data/receipts.db")

    assert isinstance(store, SqliteStore)
    assert (tmp_path / "data" / "receipts.db").is_file()
    assert store.url == f"sqlite:///{tmp_path}/data/receipts.db"
    store.close()


def test_sqlite_url_with_four_slashes_is_absolute(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/receipts.db")

    assert isinstance(store, SqliteStore)
    assert store.path == str(tmp_path / "receipts.db")
    assert store.url.startswith("sqlite:////")
    store.close()


@pytest.mark.parametrize("name", ["receipts.db", "receipts.sqlite", "receipts.SQLITE3"])
def test_bare_sqlite_file_paths_are_accepted(tmp_path: Path, name: str) -> None:
    store = open_store(str(tmp_path / name))

    assert isinstance(store, SqliteStore)
    assert (tmp_path / name).is_file()
    store.close()


@pytest.mark.parametrize(
    "url",
    [
        "",
        "receipts.json",
        f"mysql://root:{PASSWORD}@db/receipts",
        "sqlite://receipts.db",
        "redis://localhost:6379/0",
        "memory",
    ],
)
def test_unsupported_urls_list_the_accepted_forms(url: str) -> None:
    with pytest.raises(StoreConfigError) as caught:
        open_store(url)

    message = assert_one_clean_line(caught.value)
    assert message.startswith("unsupported receipt store URL")
    for form in ("memory:", "sqlite:///", ".db", "postgresql://"):
        assert form in message


@pytest.mark.parametrize("url", ["sqlite:///", "sqlite:///:memory:"])
def test_sqlite_url_without_a_file_is_refused(url: str) -> None:
    with pytest.raises(StoreConfigError, match="use memory:"):
        open_store(url)


@pytest.mark.parametrize(
    ("url", "redacted"),
    [
        (f"postgresql://app:{PASSWORD}@db.internal:5432/gate",
         "postgresql://app@db.internal:5432/gate"),
        (f"postgres://app:{PASSWORD}@[::1]:5433/gate?sslmode=require",
         "postgres://app@[::1]:5433/gate?sslmode=require"),
        (f"postgresql://app@db/gate?password={PASSWORD}&connect_timeout=3",
         "postgresql://app@db/gate?connect_timeout=3"),
        ("postgresql://app@db/gate", "postgresql://app@db/gate"),
        ("postgresql:///gate", "postgresql:///gate"),
        ("sqlite:////var/lib/callgate/receipts.db", "sqlite:////var/lib/callgate/receipts.db"),
        ("memory:", "memory:"),
    ],
)
def test_redact_url_strips_only_the_password(url: str, redacted: str) -> None:
    assert redact_url(url) == redacted


# SQLite failures ---------------------------------------------------------------------------


def test_sqlite_in_a_missing_directory_fails_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(StoreConfigError) as caught:
        SqliteStore(tmp_path / "no" / "such" / "dir" / "receipts.db")

    message = assert_one_clean_line(caught.value)
    assert message.startswith(f"cannot open receipt store sqlite:///{tmp_path}/no/such/dir/")
    assert "unable to open database file" in message


def test_sqlite_on_a_file_that_is_not_a_database_fails_in_one_line(tmp_path: Path) -> None:
    not_a_database = tmp_path / "notes.db"
    not_a_database.write_text("these are my notes, not a database\n" * 100)

    with pytest.raises(StoreConfigError) as caught:
        SqliteStore(not_a_database)

    assert "file is not a database" in assert_one_clean_line(caught.value)


def test_sqlite_migrations_run_once(tmp_path: Path) -> None:
    path = tmp_path / "receipts.db"
    first = SqliteStore(path)
    second = SqliteStore(path)

    assert first.migrate() == []
    with sqlite3.connect(path) as connection:
        versions = connection.execute("SELECT version FROM callgate_schema_version").fetchall()
        (journal_mode,) = connection.execute("PRAGMA journal_mode").fetchone()
    # receipts and reviews; run histories; run leases; the review page's sessions; the
    # receipts' log line; run intents; the history rows' change marks
    assert versions == [(1,), (2,), (3,), (4,), (5,), (6,), (7,)]
    assert journal_mode == "wal"
    first.close()
    second.close()


def test_sqlite_schema_newer_than_this_code_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "receipts.db"
    SqliteStore(path).close()
    with sqlite3.connect(path) as connection:
        connection.execute(
            "INSERT INTO callgate_schema_version (version, applied_at) VALUES (99, 'later')"
        )

    with pytest.raises(StoreConfigError, match="schema version 99 is newer"):
        SqliteStore(path)


# PostgreSQL failures -----------------------------------------------------------------------


def test_postgres_connection_refused_names_the_url_without_password() -> None:
    port = unused_port()
    url = f"postgresql://postgres:{PASSWORD}@127.0.0.1:{port}/test"

    with pytest.raises(StoreConfigError) as caught:
        open_store(url)

    assert assert_one_clean_line(caught.value) == (
        f"cannot open receipt store postgresql://postgres@127.0.0.1:{port}/test: "
        "connection refused — is the server running?"
    )


def test_postgres_scheme_alias_opens_postgres_store() -> None:
    port = unused_port()

    with pytest.raises(StoreConfigError, match=f"postgres://app@127.0.0.1:{port}/x: connection"):
        open_store(f"postgres://app:{PASSWORD}@127.0.0.1:{port}/x")


def test_postgres_without_psycopg_asks_for_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)

    with pytest.raises(StoreConfigError) as caught:
        PostgresStore(f"postgresql://app:{PASSWORD}@127.0.0.1/x")

    assert assert_one_clean_line(caught.value) == INSTALL_HINT


def test_importing_callgate_does_not_import_psycopg() -> None:
    code = "import sys, callgate_rules.store; print('psycopg' in sys.modules)"

    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )

    assert completed.stdout.strip() == "False"


def test_postgres_bad_schema_name_is_refused_before_connecting() -> None:
    with pytest.raises(StoreConfigError, match="schema name 'bad; drop'"):
        PostgresStore("postgresql://app@127.0.0.1:1/x", schema="bad; drop")


def test_postgres_missing_database_fails_in_one_line(postgres_url: str) -> None:
    missing = f"callgate_missing_{uuid.uuid4().hex[:8]}"

    with pytest.raises(StoreConfigError) as caught:
        PostgresStore(with_url_parts(postgres_url, password=PASSWORD, database=missing))

    message = assert_one_clean_line(caught.value)
    assert message.startswith("cannot open receipt store postgresql://")
    assert message.endswith(f'database "{missing}" does not exist')


def test_postgres_migrations_run_once_and_refuse_a_newer_schema(
    postgres_url: str, postgres_admin: Any, new_postgres_schema: Callable[[], str]
) -> None:
    schema = new_postgres_schema()
    first = PostgresStore(postgres_url, schema=schema)
    second = PostgresStore(postgres_url, schema=schema)
    try:
        assert first.migrate() == []
        versions = postgres_admin.execute(
            f'SELECT version FROM "{schema}".callgate_schema_version'
        ).fetchall()
        # receipts, reviews; histories; leases; page sessions; the receipts' log line;
        # run intents; the history rows' change marks
        assert versions == [(1,), (2,), (3,), (4,), (5,), (6,), (7,)]
    finally:
        first.close()
        second.close()
    postgres_admin.execute(f'INSERT INTO "{schema}".callgate_schema_version VALUES (99)')

    with pytest.raises(StoreConfigError, match="schema version 99 is newer"):
        PostgresStore(postgres_url, schema=schema)


@pytest.fixture
def unprivileged_role(postgres_admin: Any) -> Iterator[str]:
    import psycopg

    role = f"callgate_nopriv_{uuid.uuid4().hex[:8]}"
    try:
        postgres_admin.execute(f'CREATE ROLE "{role}" LOGIN')
    except psycopg.errors.InsufficientPrivilege:
        pytest.skip("the role in CALLGATE_TEST_POSTGRES_URL may not create roles")
    yield role
    postgres_admin.execute(f'DROP OWNED BY "{role}"')
    postgres_admin.execute(f'DROP ROLE "{role}"')


def test_postgres_role_without_privileges_fails_in_one_line(
    postgres_url: str,
    postgres_admin: Any,
    new_postgres_schema: Callable[[], str],
    unprivileged_role: str,
) -> None:
    schema = new_postgres_schema()
    PostgresStore(postgres_url, schema=schema).close()
    role_url = with_url_parts(postgres_url, user=unprivileged_role, password=PASSWORD)

    with pytest.raises(StoreConfigError) as no_usage:
        PostgresStore(role_url, schema=schema)
    postgres_admin.execute(f'GRANT USAGE ON SCHEMA "{schema}" TO "{unprivileged_role}"')
    postgres_admin.execute(
        f'GRANT SELECT ON ALL TABLES IN SCHEMA "{schema}" TO "{unprivileged_role}"'
    )
    with pytest.raises(StoreConfigError) as read_only:
        PostgresStore(role_url, schema=schema)

    assert f"permission denied for schema {schema}" in assert_one_clean_line(no_usage.value)
    assert assert_one_clean_line(read_only.value).endswith(
        "the role lacks DELETE, INSERT, UPDATE on callgate_receipts; "
        "DELETE, INSERT, UPDATE on callgate_reviews; "
        "DELETE, INSERT, UPDATE on callgate_run_history; "
        "DELETE, INSERT, UPDATE on callgate_run_intents; "
        "DELETE, INSERT, UPDATE on callgate_run_leases"
    )


def test_sqlite_older_than_upsert_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite3, "sqlite_version_info", (3, 23, 1))
    monkeypatch.setattr(sqlite3, "sqlite_version", "3.23.1")

    with pytest.raises(StoreConfigError) as caught:
        SqliteStore(tmp_path / "receipts.db")

    assert assert_one_clean_line(caught.value) == (
        f"cannot open receipt store sqlite:///{tmp_path}/receipts.db: SQLite 3.23.1 is too old, "
        "callgate needs 3.24.0 or newer"
    )
    assert not (tmp_path / "receipts.db").exists()
