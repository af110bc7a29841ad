"""Who is calling: the actor and session facts the gate decides for, never the model's word.

Two sources, one result (an ``Identity``):

- **files**, for a gateway a desktop client launches over stdio: ``--actor FILE`` and
  ``--session FILE`` (YAML or JSON), read once at start (``identity_from_files``);
- **a bearer token**, for anything served over HTTP: a JWT verified against an HS256
  secret, an RS256/ES256 public key (PEM) or a JWKS file, then mapped to the actor and
  session by a declared claim mapping (``TokenVerifier``, configured by ``load_auth``).
  ``BearerAuth`` is the ASGI middleware that answers 401 to a missing or invalid token and
  hands the verified identity to the application in the ASGI scope (``identity_of``).

The algorithm is never taken from the token: it follows from the configured key (a secret
is HS256, an RSA key RS256, a P-256 key ES256), so a token cannot talk the verifier into
another algorithm. Expiry is required unless the configuration says otherwise.

The authentication configuration (``--auth FILE``)::

    public_key: keys/issuer.pem      # exactly one of: secret_env, secret_file, public_key, jwks
    issuer: https://login.example.com/
    audience: callgate
    leeway: 30                       # seconds of clock skew tolerated
    claims:
      actor: {id: sub, tenant: org.tenant, role: role}   # actor field: claim (dotted path)
      session: {authenticated: amr_ok}                   # optional, likewise
      principal: sub                 # who confirms a write (default: sub)

The module needs PyJWT (with ``cryptography`` for RS256 and ES256), from the ``gateway``
or ``server`` extra; it knows nothing of MCP: the MCP gateway (``callgate gateway --http``)
and the decision service (``callgate serve``) verify their callers with this one code.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import jwt
import yaml
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.serialization import load_pem_public_key

from callgate_rules.canonical import canonical_json
from callgate_rules.documents.files import read_file_text
from callgate_rules.errors import CallgateError, InputError

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

SCOPE_KEY = "callgate.identity"  # where BearerAuth leaves the verified identity
MIN_SECRET_BYTES = 32  # RFC 7518 §3.2: an HS256 key at least as long as the hash
SOURCES = ("secret_env", "secret_file", "public_key", "jwks")


class IdentityConfigError(CallgateError):
    """The identity configuration cannot be used (a file, a key, a claim mapping)."""


class InvalidToken(CallgateError):
    """A bearer token is missing, malformed, unverifiable or lacks a mapped claim.

    Its text is safe to send back in a 401: it says what is wrong, never a secret."""


@dataclass(frozen=True)
class Identity:
    """The caller as the gate sees it: ``actor`` and ``session`` as the AccessPolicy
    declares them, and ``principal``, the name recorded as the person who confirms."""

    actor: Mapping[str, Any]
    session: Mapping[str, Any] | None = None
    principal: str = "unknown"

    def digest_source(self) -> str:
        """A stable text of the actor, for keying what belongs to one caller."""
        return json.dumps(self.actor, sort_keys=True, default=str, separators=(",", ":"))

    @cached_property
    def actor_digest(self) -> str:
        """SHA-256 (hex) of the actor's canonical JSON (``canonical.canonical_json``): the
        same actor's in every process and release, and no secret in it (the decision
        service namespaces a tenant's request IDs by it). Worked out once per identity: a
        host's remembered token gives the same one to each of its requests."""
        return hashlib.sha256(canonical_json(dict(self.actor)).encode()).hexdigest()


# From files (stdio) ------------------------------------------------------------------------


def identity_from_files(actor_path: str | Path, session_path: str | Path | None = None,
                        principal_field: str = "id") -> Identity:
    """The identity of a stdio gateway: the actor (and session) a person put in files."""
    actor = _mapping_file(actor_path, "--actor")
    session = _mapping_file(session_path, "--session") if session_path is not None else None
    principal = actor.get(principal_field)
    return Identity(actor, session, str(principal) if principal is not None else "unknown")


MAX_IDENTITY_FILE_BYTES = 1024 * 1024  # an actor, a session, a key set: a few KB each


def _mapping_file(path: str | Path, option: str) -> dict[str, Any]:
    try:  # a regular file, bounded (documents.files): never a FIFO or a device
        data = yaml.safe_load(read_file_text(Path(path), MAX_IDENTITY_FILE_BYTES))
    except InputError as error:
        raise IdentityConfigError(f"{option} {error}") from None
    except yaml.YAMLError as error:
        raise IdentityConfigError(f"{option} {path}: not YAML or JSON: "
                                  f"{str(error).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise IdentityConfigError(f"{option} {path}: expected a mapping of fields")
    return data


# Claim mapping -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ClaimMapping:
    """Which claim fills which field: ``{"tenant": "org.tenant"}`` reads
    ``claims["org"]["tenant"]`` into ``actor["tenant"]``. Every mapped claim must be in the
    token; an actor the token cannot fill is no actor."""

    actor: Mapping[str, str]
    session: Mapping[str, str] = field(default_factory=dict)
    principal: str = "sub"

    def identity(self, claims: Mapping[str, Any]) -> Identity:
        actor = {name: _claim(claims, path) for name, path in self.actor.items()}
        session = {name: _claim(claims, path) for name, path in self.session.items()}
        return Identity(actor, session or None, str(_claim(claims, self.principal)))


def _claim(claims: Mapping[str, Any], path: str) -> Any:
    value: Any = claims
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            raise InvalidToken(f"the token has no claim {path!r}")
        value = value[part]
    return value


# Token verification ------------------------------------------------------------------------


@dataclass(frozen=True)
class VerificationKey:
    """One key and the one algorithm it verifies."""

    key: Any
    algorithm: str


@dataclass(frozen=True)
class TokenVerifier:
    """Verifies a JWT and maps its claims to an ``Identity``."""

    mapping: ClaimMapping
    keys: Mapping[str | None, VerificationKey]  # by ``kid``; None: the key for tokens without
    issuer: str | None = None
    audience: str | None = None
    leeway: float = 0.0
    require_expiry: bool = True

    def verify(self, token: str) -> Identity:
        """The identity of a valid token; ``InvalidToken`` saying why otherwise."""
        key = self._key_for(token)
        required = ["exp"] if self.require_expiry else []
        try:
            claims = jwt.decode(
                token, key.key, algorithms=[key.algorithm], audience=self.audience,
                issuer=self.issuer, leeway=self.leeway,
                options={"require": required, "verify_aud": self.audience is not None})
        except jwt.ExpiredSignatureError:
            raise InvalidToken("the token has expired") from None
        except jwt.InvalidTokenError as error:
            raise InvalidToken(f"the token is not valid: {error}") from None
        return self.mapping.identity(claims)

    def _key_for(self, token: str) -> VerificationKey:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.InvalidTokenError as error:
            raise InvalidToken(f"the token is not a JWT: {error}") from None
        kid = header.get("kid")
        key = self.keys.get(kid) if kid is not None else None
        if key is None and (kid is None or None in self.keys):
            key = self.keys.get(None) or (
                next(iter(self.keys.values())) if len(self.keys) == 1 else None)
        if key is None:
            raise InvalidToken(f"no configured key verifies key ID {kid!r}")
        return key


def load_auth(path: str | Path) -> TokenVerifier:
    """The verifier an authentication file describes; ``IdentityConfigError`` naming the
    file and the field for anything that cannot work, so a bad set-up fails at start."""
    source = Path(path)
    config = _mapping_file(source, "--auth")
    where = str(source)
    given = [name for name in SOURCES if name in config]
    if len(given) != 1:
        raise IdentityConfigError(f"{where}: give exactly one of {', '.join(SOURCES)} "
                                  f"(found {', '.join(given) or 'none'})")
    keys = _keys(where, given[0], config[given[0]], source.parent)
    return TokenVerifier(
        mapping=_mapping(where, config.get("claims")), keys=keys,
        issuer=_optional_text(where, config, "issuer"),
        audience=_optional_text(where, config, "audience"),
        leeway=_number(where, config.get("leeway", 0), "leeway"),
        require_expiry=bool(config.get("require_expiry", True)))


def _keys(where: str, kind: str, value: Any, base: Path) -> dict[str | None, VerificationKey]:
    if not isinstance(value, str) or not value:
        raise IdentityConfigError(f"{where}: {kind} must be a non-empty string")
    if kind == "secret_env":
        secret = os.environ.get(value)
        if not secret:
            raise IdentityConfigError(f"{where}: secret_env {value} is not set")
        return {None: _secret(where, secret.encode(), f"${value}")}
    text = _read(where, kind, base / value)
    if kind == "secret_file":
        return {None: _secret(where, text.strip().encode(), value)}
    if kind == "public_key":
        return {None: _public_key(where, value, text.encode())}
    return _jwks(where, value, text)


def _secret(where: str, secret: bytes, name: str) -> VerificationKey:
    if len(secret) < MIN_SECRET_BYTES:
        raise IdentityConfigError(f"{where}: the HS256 secret {name} has {len(secret)} bytes; "
                                  f"use at least {MIN_SECRET_BYTES}")
    return VerificationKey(secret, "HS256")


def _public_key(where: str, name: str, pem: bytes) -> VerificationKey:
    try:
        key = load_pem_public_key(pem)
    except ValueError:
        raise IdentityConfigError(
            f"{where}: public_key {name} is not a PEM public key") from None
    if isinstance(key, rsa.RSAPublicKey):
        return VerificationKey(key, "RS256")
    if isinstance(key, ec.EllipticCurvePublicKey) and isinstance(key.curve, ec.SECP256R1):
        return VerificationKey(key, "ES256")
    raise IdentityConfigError(f"{where}: public_key {name} is neither an RSA key (RS256) nor "
                              "a P-256 key (ES256)")


_JWKS_ALGORITHMS = {"RSA": "RS256", "EC": "ES256"}


def _jwks(where: str, name: str, text: str) -> dict[str | None, VerificationKey]:
    try:
        key_set = jwt.PyJWKSet.from_json(text)
    except (jwt.PyJWKSetError, ValueError) as error:
        raise IdentityConfigError(f"{where}: jwks {name}: {error}") from None
    keys: dict[str | None, VerificationKey] = {}
    for each in key_set.keys:
        algorithm = (each.algorithm_name if each.algorithm_name in ("RS256", "ES256")
            else _JWKS_ALGORITHMS.get(str(each.key_type)))
        if algorithm is None:
            raise IdentityConfigError(f"{where}: jwks {name}: key {each.key_id!r} is neither "
                                      "RS256 nor ES256")
        keys[each.key_id] = VerificationKey(each.key, algorithm)
    return keys


def _mapping(where: str, claims: Any) -> ClaimMapping:
    if (not isinstance(claims, dict) or not isinstance(claims.get("actor"), dict)
            or not claims["actor"]):
        raise IdentityConfigError(f"{where}: claims.actor must map actor fields to claims, "
                                  "e.g. {id: sub, tenant: tenant}")
    session = claims.get("session") or {}
    for part, table in (("actor", claims["actor"]), ("session", session)):
        if not isinstance(table, dict) or not all(
                isinstance(k, str) and isinstance(v, str) and v for k, v in table.items()):
            raise IdentityConfigError(f"{where}: claims.{part} must map field names to claim "
                                      "paths (strings)")
    principal = claims.get("principal", "sub")
    if not isinstance(principal, str) or not principal:
        raise IdentityConfigError(f"{where}: claims.principal must be a claim path")
    return ClaimMapping(dict(claims["actor"]), dict(session), principal)


def _read(where: str, kind: str, path: Path) -> str:
    try:
        return read_file_text(path, MAX_IDENTITY_FILE_BYTES)
    except InputError as error:
        raise IdentityConfigError(f"{where}: {kind} {error}") from None


def _optional_text(where: str, config: Mapping[str, Any], name: str) -> str | None:
    value = config.get(name)
    if value is not None and not isinstance(value, str):
        raise IdentityConfigError(f"{where}: {name} must be a string")
    return value


def _number(where: str, value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise IdentityConfigError(f"{where}: {name} must be a number of seconds")
    return float(value)


# ASGI: 401 before the application sees the request -----------------------------------------


def bearer_token(headers: list[tuple[bytes, bytes]]) -> str | None:
    """The token of an ``Authorization: Bearer …`` header, or ``None``."""
    for name, value in headers:
        if name.lower() == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            if scheme.lower() != "bearer":
                return None
            return token.strip() or None
    return None


@dataclass
class BearerAuth:
    """ASGI middleware: every HTTP request must carry a valid bearer token.

    A missing or invalid token is answered ``401`` with a ``WWW-Authenticate`` header and
    a JSON body saying why (RFC 6750); the application never runs for it. A valid one puts
    its ``Identity`` in ``scope[SCOPE_KEY]``. Lifespan messages pass untouched."""

    app: ASGIApp
    verifier: TokenVerifier
    realm: str = "callgate"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        token = bearer_token(list(scope.get("headers", [])))
        try:
            if token is None:
                raise InvalidToken("a bearer token is required")
            scope[SCOPE_KEY] = self.verifier.verify(token)
        except InvalidToken as error:
            await self._unauthorized(send, str(error), token is not None)
            return
        await self.app(scope, receive, send)

    async def _unauthorized(self, send: Send, reason: str, had_token: bool) -> None:
        error = "invalid_token" if had_token else "invalid_request"
        body = json.dumps({"error": error, "error_description": reason}).encode()
        challenge = (f'Bearer realm="{self.realm}", error="{error}", '
                    f'error_description="{reason.replace(chr(34), chr(39))}"')
        await send({"type": "http.response.start", "status": 401, "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"www-authenticate", challenge.encode("latin-1", "replace"))]})
        await send({"type": "http.response.body", "body": body})


def identity_of(scope: Mapping[str, Any]) -> Identity | None:
    """The identity ``BearerAuth`` verified for this request, if it ran."""
    identity = scope.get(SCOPE_KEY)
    return identity if isinstance(identity, Identity) else None
