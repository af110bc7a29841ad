"""The gateway's callers: the shared identity code (``callgate_rules.integrations.identity``),
which the decision service (``callgate serve``) uses too; kept importable from here."""

from callgate_rules.integrations.identity import (
    MIN_SECRET_BYTES,
    SCOPE_KEY,
    SOURCES,
    BearerAuth,
    ClaimMapping,
    Identity,
    IdentityConfigError,
    InvalidToken,
    TokenVerifier,
    VerificationKey,
    bearer_token,
    identity_from_files,
    identity_of,
    load_auth,
)

__all__ = [
    "MIN_SECRET_BYTES", "SCOPE_KEY", "SOURCES", "BearerAuth", "ClaimMapping", "Identity",
    "IdentityConfigError", "InvalidToken", "TokenVerifier", "VerificationKey", "bearer_token",
    "identity_from_files", "identity_of", "load_auth",
]
