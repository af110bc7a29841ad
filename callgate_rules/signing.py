"""Ed25519 keys for signed bundles and signed decision-log checkpoints: PEM files as
OpenSSL writes them (``openssl genpkey -algorithm ed25519``, ``openssl pkey -pubout``).

The key ID is ``sha256:`` and the digest of the public key's DER, as ``openssl pkey -pubin
-outform DER | sha256sum`` prints it. Signing and verifying need the ``cryptography``
package (the ``bundle`` extra); it is imported on first use, so the core never needs it.
Here, below both the bundle reader and the decision log, so neither imports the other.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from callgate_rules.documents.files import read_file_text
from callgate_rules.errors import InputError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

KEY_FILE_BYTES = 64 * 1024
EXTRA_HINT = "pip install 'callgate-rules[bundle]'"


def _crypto() -> Any:
    try:
        from cryptography.hazmat.primitives import serialization
    except ImportError:
        raise InputError(f"signed bundles and logs need the cryptography package: "
                         f"{EXTRA_HINT}") from None
    return serialization


def _key_bytes(path: str | Path) -> bytes:
    return read_file_text(Path(path), KEY_FILE_BYTES, "key").encode("ascii", "replace")


def load_private_key(path: str | Path) -> Ed25519PrivateKey:
    """The Ed25519 private key in the PEM file ``path`` (``openssl genpkey -algorithm
    ed25519``); ``InputError`` naming the file when it is not one."""
    serialization = _crypto()
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    try:
        key = serialization.load_pem_private_key(_key_bytes(path), password=None)
    except TypeError:
        raise InputError(f"{path}: the private key is encrypted; write it unencrypted "
                         "(openssl pkey -in KEY -out PLAIN) and keep the file private"
                         ) from None
    except ValueError:
        raise InputError(f"{path}: not a PEM private key; make one with `openssl genpkey "
                         "-algorithm ed25519 -out KEY`") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise InputError(f"{path}: a {type(key).__name__.removeprefix('_')} key, not an "
                         "Ed25519 one; make one with `openssl genpkey -algorithm ed25519`")
    return key


def load_public_key(path: str | Path) -> Ed25519PublicKey:
    """The Ed25519 public key in the PEM file ``path`` (``openssl pkey -pubout``)."""
    serialization = _crypto()
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        key = serialization.load_pem_public_key(_key_bytes(path))
    except ValueError:
        raise InputError(f"{path}: not a PEM public key; write one with `openssl pkey "
                         "-in KEY -pubout -out PUBLIC`") from None
    if not isinstance(key, Ed25519PublicKey):
        raise InputError(f"{path}: a {type(key).__name__.removeprefix('_')} key, not an "
                         "Ed25519 one")
    return key


def key_id(public_key: Ed25519PublicKey) -> str:
    """``sha256:`` and the hex digest of the key's DER SubjectPublicKeyInfo, as
    ``openssl pkey -pubin -in PUBLIC -outform DER | sha256sum`` prints it."""
    serialization = _crypto()
    der = public_key.public_bytes(serialization.Encoding.DER,
                                  serialization.PublicFormat.SubjectPublicKeyInfo)
    return "sha256:" + hashlib.sha256(der).hexdigest()


def verifies(public_key: Ed25519PublicKey, signature: bytes, message: bytes) -> bool:
    from cryptography.exceptions import InvalidSignature

    try:
        public_key.verify(signature, message)
    except InvalidSignature:
        return False
    return True
