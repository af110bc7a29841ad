"""A contract's sensitive arguments (``spec.mask``) hidden wherever they may show: at their
paths in the arguments (``mask``), and as values inside anything else a log record, a
review item or a draft's evidence may carry (``Masking``)."""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from callgate_rules.visible_text import shown

if TYPE_CHECKING:
    from callgate_rules.documents.model import Contract


class Masking:
    """The contract's sensitive arguments hidden: at their paths (``arguments``), and as
    values inside anything else a log or a review item may carry (``masking(value)``)."""

    def __init__(self, contract: Contract, arguments: Mapping[str, Any], *,
                 as_shown: bool = False) -> None:
        # ``as_shown``: also each secret as a draft shows it made visible, for what a
        # person's page shows (``server.masked``, a draft's evidence); a log record holds
        # no made-visible text, and making a long text visible costs milliseconds
        self.arguments = mask(arguments, contract.mask)
        secrets: set[str] = set()
        for path in contract.mask:
            for value in values_at(arguments, path):
                secrets.update(form for text in _texts_of(value)
                               for form in _forms_of(text, as_shown))
        # Longest first, so that a secret inside another is not left half shown.
        self.secrets = sorted((s for s in secrets if len(s) >= MIN_MASKED), key=len,
                              reverse=True)

    def may_be_in(self, value: Any) -> bool:
        """Could ``value`` hold a masked text? One search of its JSON text, much cheaper
        than masking it; True whenever a secret is written otherwise in JSON."""
        if not self.secrets:
            return False
        text = COMPACT_JSON.encode(value)
        return any(secret in text or not _written_as_is(secret) for secret in self.secrets)

    def __call__(self, value: Any) -> Any:
        if not self.secrets:
            return value
        if isinstance(value, str):
            for secret in self.secrets:
                value = value.replace(secret, MASK)
            return value
        if isinstance(value, Mapping):
            return {key: self(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self(item) for item in value]
        if (isinstance(value, int | float) and not isinstance(value, bool)
                and str(value) in self.secrets):
            return MASK
        return value


def _forms_of(secret: str, as_shown: bool) -> set[str]:
    """The ways a secret may be written in a text the gate or the page shows: as it is, in
    NFC (the canonical arguments), made visible as a draft shows it (``↵``, ``⟨U+200B …⟩``;
    ``as_shown``) and JSON escaped (with and without ``ensure_ascii``)."""
    forms = {secret, unicodedata.normalize("NFC", secret)}
    if as_shown:
        forms |= {shown(form) for form in tuple(forms)}
    forms |= {json.dumps(form, ensure_ascii=ascii)[1:-1] for form in tuple(forms)
              for ascii in (False, True)}
    return forms


def _written_as_is(text: str) -> bool:
    """Does JSON (``ensure_ascii=False``) write ``text`` unchanged inside its quotes?"""
    return '"' not in text and "\\" not in text and text.isprintable()


# A masked value shorter than this is not looked for inside other text ("a", "1" would
# blank out half a log line and hide nothing).
MIN_MASKED = 4


def values_at(node: Any, path: tuple[str, ...]) -> list[Any]:
    """The values at ``path`` (a dotted field path; a list on the way means each item)."""
    if isinstance(node, list):
        return [value for item in node for value in values_at(item, path)]
    if not path:
        return [node]
    if isinstance(node, Mapping) and path[0] in node:
        return values_at(node[path[0]], path[1:])
    return []


def _texts_of(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, int | float):
        return [str(value)]
    if isinstance(value, Mapping):
        return [text for item in value.values() for text in _texts_of(item)]
    if isinstance(value, list | tuple):
        return [text for item in value for text in _texts_of(item)]
    return []


MASK = "***"


def mask(arguments: Mapping[str, Any], paths: tuple[tuple[str, ...], ...]) -> dict[str, Any]:
    """A copy of ``arguments`` with the contract's sensitive fields replaced by ``***``."""
    masked: dict[str, Any] = dict(arguments)
    for path in paths:
        _mask_path(masked, path)
    return masked


def _mask_path(node: dict[str, Any], path: tuple[str, ...]) -> None:
    head, rest = path[0], path[1:]
    if head not in node:
        return
    if not rest:
        node[head] = MASK
    elif isinstance(node[head], dict):
        node[head] = dict(node[head])
        _mask_path(node[head], rest)
    elif isinstance(node[head], list):  # a list on the way: each of its items
        node[head] = [_masked_item(item, rest) for item in node[head]]


def _masked_item(item: Any, path: tuple[str, ...]) -> Any:
    if isinstance(item, dict):
        copied = dict(item)
        _mask_path(copied, path)
        return copied
    return item


# ``json.dumps`` with options makes an encoder per call; one made once encodes the same.
COMPACT_JSON = json.JSONEncoder(ensure_ascii=False, default=str)
