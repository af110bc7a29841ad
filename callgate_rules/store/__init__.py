"""Receipt stores: where callgate remembers every write it let through, exactly once.

``open_store(url)`` picks the implementation from a URL; the classes can also be built
directly. The PostgreSQL store needs the optional ``postgres`` extra, imported only when used;
each implementation's module is imported when it is first asked for (a decision needs none).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from callgate_rules.errors import StoreConfigError
from callgate_rules.store.base import (
    Claim,
    ClaimOutcome,
    NewOperation,
    NewReviewItem,
    Receipt,
    ReceiptState,
    ReceiptStore,
    ReviewItem,
    ReviewStatus,
)

if TYPE_CHECKING:
    from callgate_rules.store.memory import MemoryStore
    from callgate_rules.store.postgres import PostgresStore, redact_url
    from callgate_rules.store.sqlite import SqliteStore

_IMPLEMENTED_IN = {
    "MemoryStore": "callgate_rules.store.memory",
    "PostgresStore": "callgate_rules.store.postgres",
    "redact_url": "callgate_rules.store.postgres",
    "SqliteStore": "callgate_rules.store.sqlite",
}


def __getattr__(name: str) -> Any:
    """A store class (or ``redact_url``), imported from its module on first use."""
    if name not in _IMPLEMENTED_IN:
        raise AttributeError(f"module 'callgate_rules.store' has no attribute {name!r}")
    value = globals()[name] = getattr(import_module(_IMPLEMENTED_IN[name]), name)
    return value

__all__ = [
    "Claim",
    "ClaimOutcome",
    "MemoryStore",
    "NewOperation",
    "NewReviewItem",
    "PostgresStore",
    "Receipt",
    "ReceiptState",
    "ReceiptStore",
    "ReviewItem",
    "ReviewStatus",
    "SqliteStore",
    "open_store",
    "redact_url",
]

ACCEPTED_FORMS = (
    "memory:, sqlite:///relative/path.db, sqlite:////absolute/path.db, "
    "a file path ending in .db, .sqlite or .sqlite3, or postgresql://user@host:port/database"
)
SQLITE_PREFIX = "sqlite:///"
SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")


def open_store(url: str) -> ReceiptStore:
    """Open the receipt store ``url`` names.

    - ``memory:`` — in this process only, gone when it ends;
    - ``sqlite:///path`` — an SQLite file, path relative to the working directory (four
      slashes for an absolute path, as SQLAlchemy spells it); a bare path ending in ``.db``,
      ``.sqlite`` or ``.sqlite3`` works too;
    - ``postgresql://...`` or ``postgres://...`` — a PostgreSQL database (libpq URL); a
      ``schema=NAME`` query parameter puts callgate's tables in that schema.

    Raises ``StoreConfigError`` with a one-line message for any other form, or when the
    store cannot be opened.
    """
    from callgate_rules.store.memory import MemoryStore
    from callgate_rules.store.postgres import redact_url
    from callgate_rules.store.sqlite import SqliteStore

    if url in ("memory:", "memory://"):
        return MemoryStore()
    if url.startswith(("postgresql://", "postgres://")):
        return _postgres(url)
    if url.startswith(SQLITE_PREFIX):
        path = url.removeprefix(SQLITE_PREFIX)
        if path in ("", ":memory:"):
            raise StoreConfigError(
                f"receipt store {url!r} names no file; use memory: for a store in this process"
            )
        return SqliteStore(path)
    if "://" not in url and url.lower().endswith(SQLITE_SUFFIXES):
        return SqliteStore(url)
    raise StoreConfigError(
        f"unsupported receipt store URL {redact_url(url)!r}: use {ACCEPTED_FORMS}"
    )


def _postgres(url: str) -> ReceiptStore:
    """``?schema=NAME`` is callgate's, not libpq's: take it out before connecting."""
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    from callgate_rules.store.postgres import PostgresStore

    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    schemas = [value for key, value in query if key == "schema"]
    if not schemas:
        return PostgresStore(url)
    rest = urlencode([(key, value) for key, value in query if key != "schema"])
    return PostgresStore(urlunsplit(parts._replace(query=rest)), schema=schemas[-1])
