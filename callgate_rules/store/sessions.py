"""The review page's sign-in sessions, kept by the store so every instance sees the same.

A session is a row of ``callgate_page_sessions`` (the stores' migration 4): its ID (the
random part of the signed cookie, ``server.users``), the login, when it started, when it
was last used, when it ends at the latest, and when it was revoked. The page checks a
cookie against its row at every request in one statement (``touch_page_session``): the row
must exist, be unrevoked, within its absolute lifetime and used within the idle timeout;
the same statement moves ``last_seen_at``. Signing out revokes the row, so the cookie stops
working at once on every instance that shares the store. Rows that ended are purged when
a person signs in (``purge_page_sessions``).

Time always comes from the caller, as for receipts.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Protocol, runtime_checkable

from callgate_rules.store.base import as_utc
from callgate_rules.store.statements import Dialect, Query, render

SQLITE_SESSIONS = [
    """
    CREATE TABLE callgate_page_sessions (
        session_id   TEXT PRIMARY KEY,
        login        TEXT NOT NULL,
        created_at   TEXT NOT NULL,
        last_seen_at TEXT NOT NULL,
        expires_at   TEXT NOT NULL,
        revoked_at   TEXT
    )
    """,
]
POSTGRES_SESSIONS = [
    """
    CREATE TABLE callgate_page_sessions (
        session_id   text PRIMARY KEY,
        login        text NOT NULL,
        created_at   timestamptz NOT NULL,
        last_seen_at timestamptz NOT NULL,
        expires_at   timestamptz NOT NULL,
        revoked_at   timestamptz
    )
    """,
]

INSERT_SESSION = """
    INSERT INTO callgate_page_sessions (session_id, login, created_at, last_seen_at, expires_at)
    VALUES ({session_id}, {login}, {now}, {now}, {expires_at})
"""
# The one check of a session, and its idle clock moved on, in one statement.
TOUCH_SESSION = """
    UPDATE callgate_page_sessions SET last_seen_at = {now}
    WHERE session_id = {session_id} AND revoked_at IS NULL AND expires_at > {now}
      AND last_seen_at > {idle_cutoff}
"""
REVOKE_SESSION = """
    UPDATE callgate_page_sessions SET revoked_at = {now}
    WHERE session_id = {session_id} AND revoked_at IS NULL
"""
PURGE_SESSIONS = """
    DELETE FROM callgate_page_sessions
    WHERE expires_at < {now} OR revoked_at IS NOT NULL OR last_seen_at < {idle_cutoff}
"""


@dataclass(frozen=True)
class SessionStatements:
    insert: Query
    touch: Query
    revoke: Query
    purge: Query

    @classmethod
    def of(cls, dialect: Dialect) -> SessionStatements:
        return cls(render(INSERT_SESSION, dialect), render(TOUCH_SESSION, dialect),
                   render(REVOKE_SESSION, dialect), render(PURGE_SESSIONS, dialect))


@runtime_checkable
class PageSessions(Protocol):
    """What a store that keeps the page's sessions offers (every store callgate ships)."""

    def open_page_session(self, session_id: str, *, login: str, now: datetime,
                          expires_at: datetime) -> None: ...

    def touch_page_session(self, session_id: str, *, now: datetime,
                           idle_cutoff: datetime) -> bool:
        """Is the session live (unrevoked, before its end, used after ``idle_cutoff``)?
        If so it was used ``now``."""
        ...

    def revoke_page_session(self, session_id: str, *, now: datetime) -> bool:
        """Revoke the session; whether it was live until now."""
        ...

    def purge_page_sessions(self, *, now: datetime, idle_cutoff: datetime) -> int:
        """Delete the sessions that ended (expired, revoked or idle); how many."""
        ...


@dataclass(frozen=True)
class _Session:
    login: str
    last_seen_at: datetime
    expires_at: datetime
    revoked_at: datetime | None = None


class MemorySessions:
    """The page's sessions in this process (``MemoryStore``'s)."""

    def __init__(self) -> None:
        self._sessions_lock = threading.Lock()
        self._page_sessions: dict[str, _Session] = {}

    def open_page_session(self, session_id: str, *, login: str, now: datetime,
                          expires_at: datetime) -> None:
        with self._sessions_lock:
            self._page_sessions[session_id] = _Session(login, as_utc(now), as_utc(expires_at))

    def touch_page_session(self, session_id: str, *, now: datetime,
                           idle_cutoff: datetime) -> bool:
        now = as_utc(now)
        with self._sessions_lock:
            found = self._page_sessions.get(session_id)
            if found is None or not _live(found, now, as_utc(idle_cutoff)):
                return False
            self._page_sessions[session_id] = replace(found, last_seen_at=now)
            return True

    def revoke_page_session(self, session_id: str, *, now: datetime) -> bool:
        with self._sessions_lock:
            found = self._page_sessions.get(session_id)
            if found is None or found.revoked_at is not None:
                return False
            self._page_sessions[session_id] = replace(found, revoked_at=as_utc(now))
            return True

    def purge_page_sessions(self, *, now: datetime, idle_cutoff: datetime) -> int:
        now, idle_cutoff = as_utc(now), as_utc(idle_cutoff)
        with self._sessions_lock:
            ended = [key for key, found in self._page_sessions.items()
                     if not _live(found, now, idle_cutoff)]
            for key in ended:
                del self._page_sessions[key]
            return len(ended)


def _live(session: _Session, now: datetime, idle_cutoff: datetime) -> bool:
    return (session.revoked_at is None and session.expires_at > now and
        session.last_seen_at > idle_cutoff)
