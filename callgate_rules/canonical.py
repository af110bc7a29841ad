"""Canonical JSON and operation IDs: the same validated call always gets the same ID.

The ID is made by the runtime from the request ID, the tool, the contract's name and the
canonical JSON of the *validated* arguments — never from model text, so a model that
rephrases, reorders keys or writes ``1.0`` for ``1`` cannot make a second write look new.
"""

from __future__ import annotations

import hashlib
import json
import math
import unicodedata
from collections.abc import Mapping
from typing import Any

import msgspec


def normalise(value: Any) -> Any:
    """Unicode NFC for every string and key; integral floats become ints; -0 becomes 0."""
    if isinstance(value, str):
        return unicodedata.normalize("NFC", value)
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value} has no JSON form")
        if value.is_integer() and abs(value) < 2**53:
            return int(value)
        return value
    if isinstance(value, Mapping):
        return {unicodedata.normalize("NFC", str(k)): normalise(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [normalise(item) for item in value]
    raise TypeError(f"{type(value).__name__} is not a JSON value")


# ``json.dumps`` with options makes an encoder per call; one made once encodes the same.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                              allow_nan=False)


def canonical_json(value: Any) -> str:
    """One text per JSON value: sorted keys, no spaces, NFC strings, normalised numbers."""
    written = _written_as_it_is(value)
    return _CANONICAL.encode(normalise(value)) if written is None else written


def _written_as_it_is(value: Any) -> str | None:
    """msgspec's text of ``normalise(value)`` when it is the canonical text, about a sixth
    of the standard library's cost (an operation ID makes one per write).

    msgspec writes ``value``; reading that back, every float becomes what ``normalise``
    makes of it (``_normal_number``: an integral one an integer, another one itself when
    msgspec spelled it as ``repr`` does, the spelling ``json`` writes; else none of this
    is used). What is read back
    is ``normalise(value)`` when it equals ``value`` (no tuple, no key that is not a
    string, nothing ``json`` refuses: each is read back as something else) and is NFC
    (JSON's own characters compose with nothing, so every string in it is); written
    again, it is the canonical text. Strings and integers msgspec writes as ``json`` does
    with ``ensure_ascii=False`` (``tests/pipeline/test_write_path_pipeline.py`` holds the
    two texts equal)."""
    try:
        written = _write_sorted(value)
        normal = _read_normalising_numbers(written)
        if normal != value:
            return None
        # Only an integral float read back as an integer changes the text, and msgspec
        # writes each such float with a point ("10.0"; an exponent only from 1e16 on).
        text = (_write_sorted(normal) if _POINT in written else written).decode()
    except Exception:  # noqa: BLE001 - what msgspec cannot write, or spells apart from json
        return None
    return text if text.isascii() or unicodedata.is_normalized("NFC", text) else None


def _normal_number(literal: str) -> float | int:
    """A float msgspec wrote, as ``normalise`` makes it; refused unless ``json`` would
    write it as msgspec did."""
    number = float(literal)
    if number.is_integer() and abs(number) < 2**53:
        return int(number)  # -0.0 too: 0
    if repr(number) != literal:
        raise ValueError(f"msgspec spells {number!r} as {literal}")
    return number


_POINT = ord(".")  # a byte looked for as an integer: memchr, not a search for a substring
_write_sorted = msgspec.json.Encoder(order="sorted").encode
_read_normalising_numbers = msgspec.json.Decoder(float_hook=_normal_number).decode


def arguments_hash(arguments: Mapping[str, Any]) -> str:
    return _hash_of(canonical_json(arguments).encode("utf-8"))


def operation_id(request_id: str, tool: str, contract_name: str,
                 arguments: Mapping[str, Any]) -> str:
    """``op_`` + 32 hex digits of SHA-256 over the four parts, each length-prefixed so that
    no two different tuples can produce the same input bytes."""
    return _operation_id_of(request_id, tool, contract_name,
                            canonical_json(arguments).encode("utf-8"))


def operation_keys(request_id: str, tool: str, contract_name: str,
                   arguments: Mapping[str, Any]) -> tuple[str, str]:
    """``(operation_id(...), arguments_hash(arguments))`` from one canonical text of the
    arguments: a write needs both, and the text is the larger part of their cost."""
    text = canonical_json(arguments).encode("utf-8")
    return _operation_id_of(request_id, tool, contract_name, text), _hash_of(text)


def _operation_id_of(request_id: str, tool: str, contract_name: str, text: bytes) -> str:
    parts = (request_id.encode("utf-8"), tool.encode("utf-8"), contract_name.encode("utf-8"),
             text)
    digest = hashlib.sha256(b"".join([len(part).to_bytes(8, "big") + part for part in parts]))
    return "op_" + digest.hexdigest()[:32]


def _hash_of(text: bytes) -> str:
    return hashlib.sha256(text).hexdigest()


# msgspec reads JSON about four times faster than the standard library. It refuses a few
# texts the standard library reads (NaN, 1e400, an escaped lone surrogate) and its errors
# name bytes, not lines: a reader that meets ``REFUSED`` reads the text with ``json``.
_read_with_msgspec = msgspec.json.Decoder().decode
FAST_REFUSALS = (msgspec.DecodeError, RecursionError, UnicodeError)
REFUSED: Any = object()


def read_fast(text: str) -> Any:
    """``text``'s JSON value as msgspec reads it, or ``REFUSED``; whether an object in it
    repeats a key is for ``may_repeat_a_key`` to say."""
    if type(text) is str:  # msgspec takes no str subclass
        try:
            return _read_with_msgspec(text)
        except FAST_REFUSALS:
            pass
    return REFUSED


# the decoded value written back, for its colons (``may_repeat_a_key``)
_write_compact = msgspec.json.Encoder().encode


def may_repeat_a_key(text: str, value: Any) -> bool:
    """``False`` only when no object of ``text`` repeats a key, decided without a second
    reading: outside strings, a JSON text has exactly one ``:`` per member, so its colons
    number the members plus the colons inside its strings — the same count as the decoded
    value's, re-encoded (one per key kept, and the strings kept), unless a repeated key was
    dropped with its value. An escaped colon (``\\u003a``) would spoil the count: such a
    text, or one msgspec cannot encode back, is read again exactly."""
    colons = text.count(":")
    if colons < 2:  # at most one member: nothing to repeat
        return False
    if "u003" in text:  # "\\u003a" or "\\u003A" (a needle starting with "\\" costs more)
        return True
    try:
        return colons != _write_compact(value).count(b":")
    except (msgspec.EncodeError, OverflowError, TypeError, UnicodeError):
        return True


class RepeatedKey(ValueError):
    """A JSON object repeats a key (``args[0]``): JSON leaves its meaning open."""


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A ``json.loads`` ``object_pairs_hook`` that raises ``RepeatedKey`` for a repeated key."""
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise RepeatedKey(key)
            seen.add(key)
    return result
