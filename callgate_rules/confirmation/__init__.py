"""Confirmation tokens: bound to the operation ID, the actor and the arguments, and short-lived.

A token is ``<payload>.<signature>``: the payload (base64url JSON) names the operation and
the expiry; the HMAC-SHA256 signature covers the payload *and* the actor and arguments
hashes, so a token cannot be moved to another actor or other arguments. Single use is
enforced by the receipt store: only an ``awaiting_confirmation`` receipt can be claimed.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from callgate_rules.canonical import canonical_json
from callgate_rules.errors import ConfirmationError
from callgate_rules.store.base import Receipt, ReceiptStore

NOTHING_WAITING = "no operation is waiting for this confirmation"


@dataclass(frozen=True)
class TokenClaims:
    operation_id: str
    expires_at: datetime


def actor_hash(actor: Mapping[str, Any]) -> str:
    return hashlib.sha256(canonical_json(actor).encode("utf-8")).hexdigest()


def issue(secret: bytes, operation_id: str, actor: Mapping[str, Any], args_hash: str,
          expires_at: datetime) -> str:
    payload = _b64(json.dumps({"op": operation_id, "exp": int(expires_at.timestamp())},
                              separators=(",", ":")).encode("utf-8"))
    return f"{payload}.{_sign(secret, payload, actor, args_hash)}"


def read(token: str) -> TokenClaims:
    """The claims of a token, unverified (to find its receipt); ``ConfirmationError`` if the
    token is not even well-formed."""
    if not isinstance(token, str):
        raise ConfirmationError(f"the confirmation token is not text but a "
                                f"{type(token).__name__}")
    try:
        payload, _ = token.split(".", 1)
        data = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        return TokenClaims(str(data["op"]), datetime.fromtimestamp(int(data["exp"]), tz=UTC))
    except (ValueError, KeyError, TypeError, OverflowError) as error:
        raise ConfirmationError(f"the confirmation token is malformed ({error})") from None


def verify(secret: bytes, token: str, actor: Mapping[str, Any], args_hash: str,
           now: datetime) -> TokenClaims:
    claims = read(token)
    payload, signature = token.split(".", 1)
    expected = _sign(secret, payload, actor, args_hash)
    # bytes, so that a signature with any character in it compares instead of raising
    if not hmac.compare_digest(signature.encode("utf-8", "surrogatepass"), expected.encode()):
        raise ConfirmationError("the confirmation token does not match this operation, actor "
                                "and arguments")
    if now >= claims.expires_at:
        raise ConfirmationError(f"the confirmation token expired at "
                                f"{claims.expires_at.isoformat()}; propose the call again")
    return claims


def waiting_receipt(store: ReceiptStore, secret: bytes, token: str,
                    actor: Mapping[str, Any], now: datetime) -> Receipt:
    """The receipt a confirmation token names, once the token is verified for ``actor``
    (operation, arguments, expiry); the token is verified before anything about the
    receipt is said, so whoever holds another actor's token learns nothing more. Raises
    ``ConfirmationError`` (or the store's ``StoreError``)."""
    claims = read(token)
    receipt = store.get(claims.operation_id)
    if receipt is None:
        raise ConfirmationError(NOTHING_WAITING)
    verify(secret, token, actor, receipt.args_hash, now)
    return receipt


def _sign(secret: bytes, payload: str, actor: Mapping[str, Any], args_hash: str) -> str:
    message = f"{payload}|{actor_hash(actor)}|{args_hash}".encode()
    return _b64(hmac.new(secret, message, hashlib.sha256).digest())


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")
