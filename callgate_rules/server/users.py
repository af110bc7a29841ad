"""Who may sign in to the review page, and their signed sessions.

The users file (``--users FILE``, YAML) lists each login with a PBKDF2-SHA256 password
hash, as ``callgate hash-password`` prints it::

    users:
      erin: {password: "pbkdf2_sha256$600000$<salt>$<hash>", name: Erin Okafor}

A session is a cookie ``<payload>.<signature>``: the login, a CSRF token and the expiry,
HMAC-SHA256-signed with the service's secret, so any instance sharing ``CALLGATE_SECRET``
accepts it. Every form carries the session's CSRF token; a form without it is refused.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from callgate_rules.errors import InputError

SCHEME = "pbkdf2_sha256"
ITERATIONS = 600_000  # OWASP's figure for PBKDF2-HMAC-SHA256
SESSION_SECONDS = 8 * 3600


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
        if not isinstance(login, str) or not isinstance(stored, str) or \
                not stored.startswith(SCHEME + "$"):
            raise InputError(f"--users {source}: users.{login}.password must be a hash from "
                             "`callgate hash-password`")
        users[login] = User(login, stored, str(entry.get("name") or login))
    return Users(users)


@dataclass(frozen=True)
class Session:
    login: str
    name: str
    csrf: str
    expires: int


class Sessions:
    """Signed session cookies."""

    def __init__(self, secret: bytes) -> None:
        self.secret = secret

    def issue(self, user: User, now: float | None = None) -> str:
        payload = _b64(json.dumps({"u": user.login, "n": user.name,
                                   "c": secrets.token_urlsafe(24),
                                   "e": int((now or time.time()) + SESSION_SECONDS)},
                                  separators=(",", ":")).encode())
        return f"{payload}.{self._sign(payload)}"

    def read(self, cookie: str | None, now: float | None = None) -> Session | None:
        if not cookie or "." not in cookie:
            return None
        payload, signature = cookie.rsplit(".", 1)
        if not hmac.compare_digest(signature.encode(), self._sign(payload).encode()):
            return None
        try:
            data = json.loads(_unb64(payload))
            session = Session(str(data["u"]), str(data["n"]), str(data["c"]), int(data["e"]))
        except (ValueError, KeyError, TypeError):
            return None
        return session if session.expires > (now or time.time()) else None

    def _sign(self, payload: str) -> str:
        return _b64(hmac.new(self.secret, b"session|" + payload.encode(),
                             hashlib.sha256).digest())


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
