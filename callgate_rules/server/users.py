"""Who may sign in to the review page, what each may review, and their sessions.

The users file (``--users FILE``, YAML) lists each login with a PBKDF2-SHA256 password
hash, as ``callgate hash-password`` prints it, and the scope the person may review::

    users:
      erin:
        password: "pbkdf2_sha256$600000$<salt>$<hash>"
        name: Erin Okafor
        scope: {tenants: [acme], roles: [agent], tools: [sendPayment]}
      olga: {password: "pbkdf2_sha256$...", scope: all}

``scope`` names the writes a person sees and decides: ``tenants`` and ``roles`` are the
actor's ``tenant`` and ``role`` fields, ``actor`` any other actor field
(``actor: {team: [billing]}``), ``tools`` the tools; every given list must match. ``all``
is everything; a login without ``scope`` sees what ``--unscoped`` says (nothing, by
default). See docs/explanation/reviewer-guarantees.md.

A session is a cookie ``<payload>.<signature>``: a random session ID, the login, a CSRF
token and the absolute end, HMAC-SHA256-signed with the service's secret, and checked at
every request against its row in the receipt store (``store.sessions``): revoked at
sign-out, ended after ``idle`` seconds unused or ``lifetime`` seconds in all (a token
login's at its token's ``exp`` at the latest). A cookie's signature and end are checked
first, without the store; only a signed one is looked up. Any instance
sharing ``CALLGATE_SECRET`` and the store accepts it, and stops accepting it at once when
it is revoked. Every form carries the session's CSRF token; a form without it is refused.

Sign-in attempts are throttled per source address and per login (``LoginThrottle``),
before any password is hashed, on their own budget (never the decision API's).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import json
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from callgate_rules.errors import InputError
from callgate_rules.store.scoping import FIELD_NAME, Scope
from callgate_rules.store.sessions import PageSessions

SCHEME = "pbkdf2_sha256"
ITERATIONS = 600_000  # OWASP's figure for PBKDF2-HMAC-SHA256
SESSION_SECONDS = 8 * 3600  # a session's absolute lifetime, by default
IDLE_SECONDS = 30 * 60  # ended when unused this long, by default


def hash_password(password: str, *, iterations: int = ITERATIONS) -> str:
    salt = secrets.token_bytes(16)
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    return f"{SCHEME}${iterations}${_b64(salt)}${_b64(digest)}"


def password_matches(password: str, stored: str) -> bool:
    try:
        scheme, iterations, salt, digest = stored.split("$")
        if scheme != SCHEME:
            return False
        computed = hashlib.pbkdf2_hmac("sha256", password.encode(), _unb64(salt),
                                       int(iterations))
    except (ValueError, TypeError):
        return False
    return hmac.compare_digest(computed, _unb64(digest))


@dataclass(frozen=True)
class User:
    login: str
    password_hash: str
    name: str
    scope: Scope | None = None  # None: none declared (``--unscoped`` decides)


@dataclass(frozen=True)
class Users:
    by_login: Mapping[str, User]

    def authenticate(self, login: str, password: str) -> User | None:
        user = self.by_login.get(login)
        # a hash is checked either way, so an unknown login takes as long as a wrong password
        stored = user.password_hash if user else _dummy_hash()
        return user if password_matches(password, stored) and user is not None else None


@functools.cache
def _dummy_hash() -> str:
    return hash_password(secrets.token_urlsafe(16))


SCOPE_LISTS = {"tenants": "tenant", "roles": "role"}  # users-file key: actor field


def load_users(path: str | Path) -> Users:
    source = Path(path)
    try:
        data = yaml.safe_load(source.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as error:
        raise InputError(f"--users {source}: {error}") from None
    table = data.get("users") if isinstance(data, dict) else None
    if not isinstance(table, dict) or not table:
        raise InputError(f"--users {source}: expected `users:` mapping each login to "
                         "{password: HASH}")
    users = {}
    for login, entry in table.items():
        stored = entry.get("password") if isinstance(entry, dict) else None
        if (not isinstance(login, str) or not isinstance(stored, str) or
                not stored.startswith(SCHEME + "$")):
            raise InputError(f"--users {source}: users.{login}.password must be a hash from "
                             "`callgate hash-password`")
        scope = _scope_of(entry.get("scope"), f"--users {source}: users.{login}.scope")
        users[login] = User(login, stored, str(entry.get("name") or login), scope)
    return Users(users)


def _scope_of(given: Any, where: str) -> Scope | None:
    """A users-file ``scope``: ``all``, or a mapping of ``tenants``, ``roles``, ``tools``
    and ``actor`` (field: values) lists."""
    if given is None:
        return None
    if given == "all":
        return Scope()
    if not isinstance(given, dict) or not given:
        raise InputError(f"{where}: expected `all` or a mapping of tenants, roles, tools "
                         "or actor, e.g. {tenants: [acme], tools: [sendPayment]}")
    actor: dict[str, frozenset[str]] = {}
    tools: frozenset[str] | None = None
    for key, value in given.items():
        if key == "actor":
            if not isinstance(value, dict) or not value:
                raise InputError(f"{where}.actor: expected a mapping of actor field to a list "
                                 "of values, e.g. {team: [billing]}")
            for name, values in value.items():
                if not isinstance(name, str) or not FIELD_NAME.match(name):
                    raise InputError(f"{where}.actor.{name}: an actor field is a plain name "
                                     "(letters, digits, _)")
                actor[name] = _texts(values, f"{where}.actor.{name}")
        elif key in SCOPE_LISTS:
            actor[SCOPE_LISTS[key]] = _texts(value, f"{where}.{key}")
        elif key == "tools":
            tools = _texts(value, f"{where}.tools")
        else:
            raise InputError(f"{where}.{key}: unknown key; a scope has tenants, roles, tools "
                             "and actor")
    return Scope(actor, tools)


def _texts(values: Any, where: str) -> frozenset[str]:
    listed = [values] if isinstance(values, str) else values
    if (not isinstance(listed, list) or not listed or
            not all(isinstance(value, str) and value for value in listed)):
        raise InputError(f"{where}: expected a list of names, e.g. [acme]")
    return frozenset(listed)


@dataclass(frozen=True)
class Session:
    session_id: str
    login: str
    name: str
    csrf: str
    expires: int
    scope: Scope | None = None  # a token login's, from its pinned claims; else the file's


Clock = Callable[[], float]


class Sessions:
    """Signed session cookies, each checked against its row in the store at every use."""

    def __init__(self, secret: bytes, store: PageSessions, *, idle: float = IDLE_SECONDS,
                 lifetime: float = SESSION_SECONDS, clock: Clock = time.time) -> None:
        self.secret = secret
        self.store = store
        self.idle = idle
        self.lifetime = lifetime
        self.clock = clock

    def issue(self, user: User, scope: Scope | None = None,
              ends_by: float | None = None) -> str:
        """A new session for ``user`` (a row in the store), as its cookie. ``ends_by`` caps
        its absolute end (a token login's: the token's ``exp``, so a session never outlives
        the credential it was opened with)."""
        now = self.clock()
        session_id = secrets.token_urlsafe(24)
        expires = int(now + self.lifetime)
        if ends_by is not None:
            expires = min(expires, int(ends_by))
        self.store.purge_page_sessions(now=_at(now), idle_cutoff=_at(now - self.idle))
        self.store.open_page_session(session_id, login=user.login, now=_at(now),
                                     expires_at=_at(expires))
        data: dict[str, Any] = {"i": session_id, "u": user.login, "n": user.name,
                                "c": secrets.token_urlsafe(24), "e": expires}
        if scope is not None:
            data["s"] = {"a": {k: sorted(v) for k, v in scope.actor.items()},
                         "t": None if scope.tools is None else sorted(scope.tools)}
        payload = _b64(json.dumps(data, separators=(",", ":")).encode())
        return f"{payload}.{self._sign(payload)}"

    def read(self, cookie: str | None) -> Session | None:
        """The live session of a cookie (its idle clock moved on), or ``None``."""
        session = self.signed(cookie)
        return None if session is None else self.live(session)

    def signed(self, cookie: str | None) -> Session | None:
        """The session of a cookie whose signature holds and whose end has not passed, or
        ``None``: the HMAC alone, no store (cheap enough for the event loop, so a forged
        or stale cookie costs no store call and no worker)."""
        session = self.verified(cookie)
        if session is None or session.expires <= self.clock():
            return None
        return session

    def live(self, session: Session) -> Session | None:
        """``session`` (from ``signed``) if its row in the store is live; its idle clock
        moved on."""
        now = self.clock()
        live = self.store.touch_page_session(session.session_id, now=_at(now),
                                             idle_cutoff=_at(now - self.idle))
        return session if live else None

    def revoke(self, cookie: str | None) -> bool:
        """End the cookie's session on every instance; whether it was live."""
        session = self.verified(cookie)
        if session is None:
            return False
        return self.store.revoke_page_session(session.session_id, now=_at(self.clock()))

    def verified(self, cookie: str | None) -> Session | None:
        """The session a cookie names, if its signature holds (not yet checked as live)."""
        if not cookie or "." not in cookie:
            return None
        payload, signature = cookie.rsplit(".", 1)
        if not hmac.compare_digest(signature.encode(), self._sign(payload).encode()):
            return None
        try:
            data = json.loads(_unb64(payload))
            scope = None
            if isinstance(data.get("s"), dict):
                tools = data["s"]["t"]
                scope = Scope({str(k): frozenset(map(str, v)) for k, v in data["s"]["a"].items()},
                              None if tools is None else frozenset(map(str, tools)))
            return Session(str(data["i"]), str(data["u"]), str(data["n"]), str(data["c"]),
                           int(data["e"]), scope)
        except (ValueError, KeyError, TypeError, AttributeError):
            return None

    def _sign(self, payload: str) -> str:
        return _b64(hmac.new(self.secret, b"session|" + payload.encode(),
                             hashlib.sha256).digest())


def _at(moment: float) -> datetime:
    return datetime.fromtimestamp(moment, tz=UTC)


@dataclass(frozen=True)
class LoginLimits:
    """How many sign-in attempts are let through per ``window`` seconds: ``per_address``
    attempts from one source address, ``failures_per_login`` failed attempts for one login
    name (whoever makes them). Past either, a sign-in is refused before any password is
    hashed, until the window has room again."""

    per_address: int = 20
    failures_per_login: int = 10
    window: float = 300.0


class LoginThrottle:
    """Sliding-window counts per address and per login, in this instance."""

    def __init__(self, limits: LoginLimits, clock: Clock = time.monotonic) -> None:
        self.limits = limits
        self.clock = clock
        self._lock = threading.Lock()
        self._attempts: dict[str, deque[float]] = {}
        self._failures: dict[str, deque[float]] = {}

    def admit(self, address: str, login: str) -> float | None:
        """``None`` if this attempt may go on (it is counted for the address), else the
        seconds to wait."""
        now = self.clock()
        with self._lock:
            attempts = self._window(self._attempts, address, now)
            failures = self._window(self._failures, login, now)
            if len(failures) >= self.limits.failures_per_login:
                return max(failures[0] + self.limits.window - now, 1.0)
            if len(attempts) >= self.limits.per_address:
                return max(attempts[0] + self.limits.window - now, 1.0)
            attempts.append(now)
            return None

    def failed(self, login: str) -> None:
        now = self.clock()
        with self._lock:
            self._window(self._failures, login, now).append(now)

    def _window(self, table: dict[str, deque[float]], key: str, now: float) -> deque[float]:
        found = table.setdefault(key, deque())
        while found and found[0] <= now - self.limits.window:
            found.popleft()
        if len(table) > 100_000:  # a flood of distinct keys: forget the idle ones
            for stale in [k for k, v in table.items() if not v and k != key]:
                del table[stale]
        return found


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
