"""A content-addressed cache on disk for what loading derives from unchanged documents.

An entry is named by a SHA-256 of what it was derived from (the source content, what the
derivation depends on, callgate's version), so an entry can never be found for other
content, and a changed document, a new callgate or a new jsonschema simply finds no entry.
Where: ``CALLGATE_CACHE_DIR`` if set (empty: no cache at all), else ``$XDG_CACHE_HOME/
callgate``, else ``~/.cache/callgate``.

Safe to share and to delete: entries are written to a temporary file and renamed into
place (``os.replace`` is atomic), so readers see a whole entry or none; each entry carries
the digest of its content, so a truncated or corrupt one is ignored (and written again by
the next load that derives it); deleting the directory only costs the next load its full
price. A directory that cannot be written (read-only, full) is no error: the cache is then
read only, or not used.

What is cached: that an argument or result schema passed the JSON Schema meta-schema check
(the dearest part of loading a contract); each YAML file as read (data and the place of
every node, as JSON); the code objects of the Python that CEL expressions and schema checks
compile to (``marshal``, keyed by the source and the interpreter's bytecode magic). Like
``__pycache__``, the directory must be writable only by those trusted to run code as you:
it is created private to the user.
"""

from __future__ import annotations

import hashlib
import json
import marshal
import os
from functools import cache
from importlib.util import MAGIC_NUMBER
from pathlib import Path
from types import CodeType
from typing import Any

_MAGIC = b"callgate-cache 1\n"


@cache
def _versions() -> str:
    """callgate's and jsonschema's versions: either changing invalidates every entry."""
    from importlib import metadata

    found = []
    for package in ("callgate-rules", "jsonschema"):
        try:
            found.append(f"{package} {metadata.version(package)}")
        except metadata.PackageNotFoundError:
            found.append(f"{package} unknown")
    return "; ".join(found)


def cache_directory() -> Path | None:
    """Where entries live, or None when ``CALLGATE_CACHE_DIR`` is set empty (no cache)."""
    root = _cache_root()
    return None if root is None else Path(root)


class ContentCache:
    """Entries of one kind (``kind`` names what they hold and how it was derived)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def key(self, content: bytes) -> str:
        """The entry name for what was derived from ``content``."""
        digest = hashlib.sha256()
        for part in (self.kind.encode(), _versions().encode(), content):
            digest.update(len(part).to_bytes(8, "little"))
            digest.update(part)
        return digest.hexdigest()

    def get(self, key: str) -> bytes | None:
        """The entry's content, or None when there is none or it is not whole."""
        path = self._path(key)
        if path is None:
            return None
        try:
            with open(path, "rb") as entry:
                stored = entry.read()
        except OSError:
            return None
        if not stored.startswith(_MAGIC) or b"\n" not in stored[len(_MAGIC):]:
            return None
        header, _, content = stored[len(_MAGIC):].partition(b"\n")
        if header != hashlib.sha256(content).hexdigest().encode():
            return None  # truncated or corrupt: ignored, and rewritten by the next put
        return content

    def put(self, key: str, content: bytes) -> None:
        """Store ``content`` under ``key`` atomically; a directory that cannot be written
        leaves the cache as it was."""
        path = self._path(key)
        if path is None:
            return
        import tempfile  # only a write needs it

        entry = _MAGIC + hashlib.sha256(content).hexdigest().encode() + b"\n" + content
        try:
            root, folder = _cache_root(), os.path.dirname(path)
            if root is not None:  # private to the user, as __pycache__'s trust needs
                os.makedirs(root, mode=0o700, exist_ok=True)
            os.makedirs(folder, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=folder, prefix=".entry-")
            try:
                with os.fdopen(handle, "wb") as written:
                    written.write(entry)
                os.replace(temporary, path)
            except BaseException:
                os.unlink(temporary)
                raise
        except OSError:
            return

    def _path(self, key: str) -> str | None:
        root = _cache_root()
        if root is None:
            return None
        return os.path.join(root, self.kind, key[:2], key)


def _cache_root() -> str | None:
    """``cache_directory()`` as text, without pathlib's cost on every entry."""
    chosen = os.environ.get("CALLGATE_CACHE_DIR")
    if chosen is not None:
        return chosen or None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "callgate")


# Schemas that passed the meta-schema check -----------------------------------------------------

VALID_SCHEMAS = ContentCache("valid-json-schema")
_JSON_SCALARS = (str, int, float, bool, type(None))


def schema_key(schema: Any) -> str | None:
    """The entry name of ``schema``'s meta-schema check: its canonical JSON text, hashed;
    None for a schema that is not plain JSON (a key that is not a string, a value JSON does
    not have), which is then always checked afresh."""
    pending = [schema]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            if not all(type(key) is str for key in item):
                return None
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
        elif not isinstance(item, _JSON_SCALARS):
            return None
    try:
        text = json.dumps(schema, sort_keys=True, ensure_ascii=False, allow_nan=False,
                          separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        return None
    return VALID_SCHEMAS.key(text.encode("utf-8", "surrogatepass"))


# YAML files as composed and constructed ---------------------------------------------------------

PARSED_YAML = ContentCache("parsed-yaml")
# One document as ``SourceDocument`` holds it: data, places, index in the file, scalars.
Parsed = tuple[Any, dict[tuple[str | int, ...], tuple[int, int]], int,
               dict[tuple[str | int, ...], tuple[str | None, int, int]]]


def yaml_key(text: str, path: str) -> str:
    """The entry name of ``text`` read from ``path`` (the path is in every place)."""
    return PARSED_YAML.key(json.dumps([path, text]).encode())


def parsed_documents(key: str) -> list[Parsed] | None:
    """The documents remembered under ``key``, or None. Entries are JSON, never code: an
    entry someone else wrote can hold wrong data at worst, and only for that very text."""
    stored = PARSED_YAML.get(key)
    if stored is None:
        return None
    try:
        entries = json.loads(stored)
        return [(data, {tuple(path): (line, column) for path, line, column in places}, index,
                 {tuple(path): (style, first, last) for path, style, first, last in scalars})
                for data, places, index, scalars in entries]
    except (ValueError, TypeError):
        return None


def remember_documents(key: str, documents: list[Parsed]) -> None:
    """Store the documents of one file, unless their data is not plain JSON (keys that are
    not strings, dates): those are read afresh every time, so a reading is never changed."""
    if not all(_plain_json(data) for data, _, _, _ in documents):
        return
    entries = [[data, [[list(path), *place] for path, place in places.items()], index,
                [[list(path), *scalar] for path, scalar in scalars.items()]]
               for data, places, index, scalars in documents]
    try:
        text = json.dumps(entries, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        return
    PARSED_YAML.put(key, text.encode())


def _plain_json(value: Any) -> bool:
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            if not all(type(key) is str for key in item):
                return False
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
        elif type(item) not in _EXACT_SCALARS:
            return False
    return True


_EXACT_SCALARS = frozenset({str, int, float, bool, type(None)})  # what JSON reads back as is


# Code objects ------------------------------------------------------------------------------------

COMPILED_CODE = ContentCache("python-code")


def compiled(source: str, filename: str) -> CodeType:
    """``compile(source, filename, "exec")``, the code object remembered for this source on
    this interpreter (its bytecode magic is in the key). A source that does not compile
    raises as ``compile`` does, and is never remembered."""
    key = COMPILED_CODE.key(MAGIC_NUMBER + f"{filename}\n{source}".encode(
        "utf-8", "surrogatepass"))
    stored = COMPILED_CODE.get(key)
    if stored is not None:
        try:
            code = marshal.loads(stored)
        except (ValueError, EOFError, TypeError):
            code = None
        if isinstance(code, CodeType):
            return code
    code = compile(source, filename, "exec")
    COMPILED_CODE.put(key, marshal.dumps(code))
    return code
