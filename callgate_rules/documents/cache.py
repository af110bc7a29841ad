"""A content-addressed cache on disk for what loading derives from unchanged documents.

How entries are named, where they live and why they are safe to share and to delete: see
``callgate_rules.cache``, the store this module's caches are made with.

What is cached: that an argument or result schema passed the JSON Schema meta-schema check
(the dearest part of loading a contract); each YAML file as read (data and the place of
every node, as ``marshal`` data); the code objects of the Python that schema checks compile
to (``marshal``, keyed by the source and the interpreter's bytecode magic); CEL expressions
whole (``cel.expression``: code, constants, tree and what they read). A whole
configuration's compilation, and lint's findings, are kept above these pieces by
``documents.snapshot``. The store itself (``ContentCache``, where it lives, ``compiled``) is
``callgate_rules.cache``, which CEL's compiler uses too; its names are re-exported here.
"""

from __future__ import annotations

import json
import marshal
from collections.abc import Callable
from typing import Any

# Re-exported: the store is part of this module's interface (tests and callers use it here).
from callgate_rules.cache import ContentCache as ContentCache
from callgate_rules.cache import cache_directory as cache_directory
from callgate_rules.cache import compiled as compiled

# Schemas that passed the meta-schema check -----------------------------------------------------

VALID_SCHEMAS = ContentCache("valid-json-schema")
_JSON_SCALARS = (str, int, float, bool, type(None))


def schema_key(schema: Any) -> str | None:
    """The entry name of ``schema``'s meta-schema check: its canonical JSON text, hashed;
    None for a schema that is not plain JSON (a key that is not a string, a value JSON does
    not have), which is then always checked afresh."""
    if not _plain_json(schema, lambda item: isinstance(item, _JSON_SCALARS)):
        return None
    try:
        text = json.dumps(schema, sort_keys=True, ensure_ascii=False, allow_nan=False,
                          separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        return None
    return VALID_SCHEMAS.key(text.encode("utf-8", "surrogatepass"))


# YAML files as composed and constructed ---------------------------------------------------------

PARSED_YAML = ContentCache("parsed-yaml-marshal")
# One document as ``SourceDocument`` holds it: data, places, index in the file, scalars.
Parsed = tuple[Any, dict[tuple[str | int, ...], tuple[int, int]], int,
               dict[tuple[str | int, ...], tuple[str | None, int, int]]]


def yaml_key(text: str, path: str) -> str:
    """The entry name of ``text`` read from ``path`` (the path is in every place)."""
    return PARSED_YAML.key(json.dumps([path, text]).encode())


def parsed_documents(stored: bytes) -> list[Parsed] | None:
    """The documents of an entry (``PARSED_YAML.get``), or None when it holds none. Entries
    are ``marshal``'s data (a third of JSON's reading time: the places' tuple keys are
    stored as they are), never run: an entry someone else wrote can hold wrong data at
    worst, and only for that very text."""
    try:
        entries = marshal.loads(stored)
    except (ValueError, EOFError, TypeError):
        return None
    if type(entries) is not list or not all(
            type(entry) is tuple and len(entry) == 4 and type(entry[1]) is dict
            and type(entry[2]) is int and type(entry[3]) is dict for entry in entries):
        return None
    return entries


def remember_documents(key: str, documents: list[Parsed]) -> bytes | None:
    """Store the documents of one file and return the entry, unless their data is not
    plain JSON (keys that are not strings, dates): those are read afresh every time, so a
    reading is never changed."""
    if not all(_plain_json(data) for data, _, _, _ in documents):
        return None
    try:
        entry = marshal.dumps([(data, dict(places), index, dict(scalars))
                               for data, places, index, scalars in documents])
    except ValueError:  # nested too deeply for marshal: read afresh each time
        return None
    PARSED_YAML.put(key, entry)
    return entry


def _plain_json(value: Any, plain_scalar: Callable[[Any], bool] | None = None) -> bool:
    """Whether ``value`` is JSON: string keys only, and scalars ``plain_scalar`` accepts
    (by default: of exactly the types JSON reads back as they are)."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            if not all(type(key) is str for key in item):
                return False
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
        elif not (type(item) in _EXACT_SCALARS if plain_scalar is None
                  else plain_scalar(item)):
            return False
    return True


_EXACT_SCALARS = frozenset({str, int, float, bool, type(None)})  # what JSON reads back as is
