"""The load cache's store: a content-addressed cache on disk, shared by every layer that
derives something from unchanged content (the documents' YAML and schema checks, CEL's
compiled expressions, Python code objects).

An entry is named by a SHA-256 of what it was derived from (the source content, what the
derivation depends on, callgate's and jsonschema's module files), so an entry can never be
found for other content, and a changed document, a new callgate or a new jsonschema simply
finds no entry.
Where: ``CALLGATE_CACHE_DIR`` if set (empty: no cache at all), else ``$XDG_CACHE_HOME/
callgate``, else ``~/.cache/callgate``.

Safe to share and to delete: entries are written to a temporary file and renamed into
place (``os.replace`` is atomic), so readers see a whole entry or none; each entry carries
the digest of its content, so a truncated or corrupt one is ignored (and written again by
the next load that derives it); deleting the directory only costs the next load its full
price. A directory that cannot be written (read-only, full) is no error: the cache is then
read only, or not used. Like ``__pycache__``, the directory must be writable only by those
trusted to run code as you (code objects and pickled expressions are loaded from it): it is
created private to the user.
"""

from __future__ import annotations

import hashlib
import marshal
import os
from functools import cache
from importlib.util import MAGIC_NUMBER
from pathlib import Path
from types import CodeType

_MAGIC = b"callgate-cache 1\n"


@cache
def _versions() -> str:
    """callgate's and jsonschema's code: a change to any of their module files (an upgrade,
    an edit of an editable install) invalidates every entry. Their files, not their version
    numbers: reading an installed distribution's version imports ``importlib.metadata`` and
    its e-mail parser (about 10 ms of every process's start), and says less."""
    from importlib.util import find_spec

    found = [f"source {source_fingerprint(os.path.dirname(os.path.abspath(__file__)))}"]
    spec = find_spec("jsonschema")
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        found.append(f"jsonschema {source_fingerprint(folder)}")
    return "; ".join(found)


def source_fingerprint(package: str) -> str:
    """A digest of every module file under ``package`` (name, size, modification time):
    an editable install keeps its version while its code changes, and an entry derived by
    other code (a compiler fixed since) must not be found. About a millisecond for callgate."""
    stats: list[str] = []
    pending = [package]
    while pending:
        with os.scandir(pending.pop()) as listing:
            for item in listing:
                if item.is_dir(follow_symlinks=False):
                    if item.name != "__pycache__":
                        pending.append(item.path)
                elif item.name.endswith(".py"):
                    found = item.stat()
                    stats.append(f"{os.path.relpath(item.path, package)} {found.st_size} "
                                 f"{found.st_mtime_ns}")
    return hashlib.sha256("\n".join(sorted(stats)).encode("utf-8", "surrogateescape")
                          ).hexdigest()


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
            folder = os.path.dirname(path)
            try:  # the folders are made once; a first load writes thousands of entries
                handle, temporary = tempfile.mkstemp(dir=folder, prefix=".entry-")
            except FileNotFoundError:
                root = _cache_root()
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


def cache_enabled() -> bool:
    """Whether a cache directory is configured, without making its ``Path`` (see
    ``_cache_root``)."""
    return _cache_root() is not None


def _cache_root() -> str | None:
    """``cache_directory()`` as text, without pathlib's cost on every entry."""
    chosen = os.environ.get("CALLGATE_CACHE_DIR")
    if chosen is not None:
        return chosen or None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "callgate")


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
