"""How the gate recognises its own words when they come back in a conversation.

A host appends each decision's agent message to the conversation as the tool result of the
model's call (``openai_tool_message`` and its siblings in ``integrations.formats``). A
refusal repeats the value it refused ("The account GB33… was not given by the user"); read
back as a tool result, that value would count as *seen in a tool result* on the retry, and
the refusal would turn into a confirmation request. So the gate's own words are never
evidence, and the gate must tell them apart from every other tool result.

Threat model. The user writes user messages; the host writes the system prompt and the
structure of every message; the model writes assistant messages (text, tool names,
arguments), never tool results; an outside party (an e-mail, a web page, a document, a
hostile tool) writes the *content* of tool results, any text at all, including a copy of
anything the gate ever said. A mark in the message structure (an extra field) would be out
of that party's reach, but the model APIs reject messages with fields they do not know, so
the mark has to live in the text. A fixed marker in the text could be copied by anyone.

So the mark is a seal: ``[callgate-seal:v1:TAG]`` at the end of the text, where TAG is an
HMAC-SHA256 (128 bits) over the text before it and the ID of the call it answers, keyed
with a key derived from the gate's secret (domain-separated from confirmation tokens).
Without the secret nobody can seal a text of their own. A genuine sealed message copied
elsewhere does not verify: another call ID, or more text around it. A seal that does not
verify is ignored — the text is read as the ordinary tool result it claims not to be — and
noted. Recognising a text only ever *removes* evidence, never adds any.

The seal is only as stable as the secret: pass ``secret=`` to the gate (or set
``CALLGATE_SECRET``) when conversations outlive the process; otherwise a restart makes the
old seals unverifiable, and the old refusals count as tool results again, as they did before
seals existed.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
import threading

SEAL_OPENING = "\n\n[callgate-seal:v1:"
SEAL_CLOSING = "]"
_TAG_CHARACTERS = 22  # 16 bytes, URL-safe base64 without padding
_TAG_ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
_SEAL_LENGTH = len(SEAL_OPENING) + _TAG_CHARACTERS + len(SEAL_CLOSING)
_KEY_LABEL = b"callgate/provenance-seal/v1"


class Sealer:
    """Seals the gate's own tool-result texts, and recognises them when they come back."""

    def __init__(self, secret: bytes) -> None:
        self._key = hmac.new(secret, _KEY_LABEL, hashlib.sha256).digest()

    def seal(self, text: str, answers: str) -> str:
        """``text`` with the gate's seal, as the tool result answering the call ``answers``."""
        return f"{text}{SEAL_OPENING}{self._tag(text, answers)}{SEAL_CLOSING}"

    def is_gates_own(self, text: str, answers: str) -> bool:
        """Whether ``text``, read as the tool result of the call ``answers``, is a text this
        gate (or one with the same secret) sealed for that call."""
        parts = split_seal(text)
        if parts is None:
            return False
        body, tag = parts
        return hmac.compare_digest(tag, self._tag(body, answers))

    def _tag(self, body: str, answers: str) -> str:
        call = answers.encode("utf-8", "surrogatepass")
        mac = hmac.new(self._key, len(call).to_bytes(8, "big") + call, hashlib.sha256)
        mac.update(body.encode("utf-8", "surrogatepass"))
        return base64.urlsafe_b64encode(mac.digest()[:16]).decode("ascii").rstrip("=")


def split_seal(text: str) -> tuple[str, str] | None:
    """(the text before the seal, the seal's tag) when ``text`` ends in something shaped like
    a seal, else None. Shape only: whether it verifies is ``Sealer.is_gates_own``."""
    if len(text) < _SEAL_LENGTH or not text.endswith(SEAL_CLOSING):
        return None
    start = len(text) - _SEAL_LENGTH
    if not text.startswith(SEAL_OPENING, start):
        return None
    tag = text[start + len(SEAL_OPENING):-len(SEAL_CLOSING)]
    if not _TAG_ALPHABET.issuperset(tag):
        return None
    return text[:start], tag


_DEFAULT: list[Sealer] = []
_DEFAULT_LOCK = threading.Lock()


def default_sealer() -> Sealer:
    """The sealer used when the gate passes none: keyed with ``CALLGATE_SECRET`` when it is
    set, else with a key drawn once per process (the same one for the formats helpers and
    the reader, so seals made and read in one process always agree)."""
    with _DEFAULT_LOCK:
        if not _DEFAULT:
            configured = os.environ.get("CALLGATE_SECRET")
            _DEFAULT.append(Sealer(configured.encode() if configured
                                   else secrets.token_bytes(32)))
        return _DEFAULT[0]
