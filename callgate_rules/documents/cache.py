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

What is cached today: that an argument or result schema passed the JSON Schema meta-schema
check (the dearest part of loading a contract). See the README's benchmark section.
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import cache
from pathlib import Path
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
    chosen = os.environ.get("CALLGATE_CACHE_DIR")
    if chosen is not None:
        return Path(chosen) if chosen else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "callgate"


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
            stored = path.read_bytes()
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
            path.parent.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".entry-")
            try:
                with os.fdopen(handle, "wb") as written:
                    written.write(entry)
                os.replace(temporary, path)
            except BaseException:
                os.unlink(temporary)
                raise
        except OSError:
            return

    def _path(self, key: str) -> Path | None:
        directory = cache_directory()
        if directory is None:
            return None
        return directory / self.kind / key[:2] / key


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
